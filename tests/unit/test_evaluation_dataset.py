"""Evaluation datasets: JSONL examples checked line by line; a bad line names its line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planexec.evaluation import DatasetError, load_dataset


def write(folder: Path, *lines: object, name: str = "set.jsonl") -> Path:
    path = folder / name
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n",
        encoding="utf-8",
    )
    return path


def example(**outputs: object) -> dict[str, object]:
    return {"inputs": {"task": "Summarise sales.csv"}, "outputs": outputs}


def test_a_dataset_reads_each_example_with_its_expectations(tmp_path: Path) -> None:
    (tmp_path / "sales.csv").write_text("a\n1\n")
    path = write(
        tmp_path,
        {
            "id": "stats",
            "inputs": {"task": "t", "data": ["sales.csv"], "context": {"max_steps": 5}},
            "outputs": {
                "trajectory": {
                    "steps": [
                        "load_csv",
                        {"tool": "calculate_stats", "args": {"value_column": "revenue"}},
                    ],
                    "match": "superset",
                },
                "facts": ["897325"],
                "status": "succeeded",
                "max_model_calls": 2,
            },
        },
        "",  # blank lines are skipped
        example(tools=["load_csv"]),
    )
    examples = load_dataset(path)
    assert [e.id for e in examples] == ["stats", "3"]  # the line number
    first = examples[0]
    assert first.data == [tmp_path / "sales.csv"]
    assert first.inputs.context == {"max_steps": 5}
    assert first.outputs.trajectory is not None and first.outputs.trajectory.match == "superset"
    assert examples[1].outputs.tools == ["load_csv"]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("{not json", "line 2: not valid JSON"),
        (json.dumps({"inputs": {}, "outputs": {}}), "line 2: inputs.task: Field required"),
        (json.dumps(example(status="great")), "line 2: outputs.status"),
        (json.dumps(example(max_steps=-1)), "line 2: outputs.max_steps"),
        (json.dumps(example(tools=["a"], trajectory={"steps": ["a"]})), "line 2: outputs"),
        (json.dumps({**example(), "extra": 1}), "line 2: extra: Extra inputs are not permitted"),
        (
            json.dumps({"inputs": {"task": "t", "context": {"aproval": "x"}}, "outputs": {}}),
            "line 2: inputs.context: aproval: unknown field (did you mean approval?)",
        ),
        (
            json.dumps({"inputs": {"task": "t", "context": {"approval": "always"}}, "outputs": {}}),
            "line 2: inputs.context: approval",
        ),
        (
            json.dumps({"inputs": {"task": "t", "context": {"max_steps": "5"}}, "outputs": {}}),
            "line 2: inputs.context: max_steps",
        ),
        (
            json.dumps(example(trajectory={"steps": ["a"], "match": "fuzzy"})),
            "line 2: outputs.trajectory.match",
        ),
        ("[" * 100_000 + "]" * 100_000, "line 2: "),
        (json.dumps(example(facts=["x" * 2_000_000])), "line 2: longer than"),
        ("[1, 2]", "line 2: an example is a JSON object"),
    ],
)
def test_a_bad_line_is_one_error_naming_the_line_and_field(
    tmp_path: Path, line: str, said: str
) -> None:
    path = write(tmp_path, example(), line)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    message = str(caught.value)
    assert said in message, message
    assert str(path) in message
    assert "\n" not in message
    assert len(message) < 600


@pytest.mark.parametrize(
    "data", ["/etc/passwd", "../outside.csv", "sub/../../outside.csv", "missing.csv", "link.csv"]
)
def test_data_files_stay_inside_the_dataset_folder(tmp_path: Path, data: str) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    (tmp_path / "outside.csv").write_text("secret\n")
    (folder / "link.csv").symlink_to(tmp_path / "outside.csv")
    path = write(folder, {"inputs": {"task": "t", "data": [data]}, "outputs": {}})
    with pytest.raises(DatasetError, match="line 1: inputs.data"):
        load_dataset(path)


def test_the_demo_data_is_named_by_its_package_path(tmp_path: Path) -> None:
    path = write(
        tmp_path, {"inputs": {"task": "t", "data": ["planexec:demo/sales.csv"]}, "outputs": {}}
    )
    (found,) = load_dataset(path)[0].data
    assert found.name == "sales.csv" and found.is_file()
    bad = write(
        tmp_path,
        {"inputs": {"task": "t", "data": ["planexec:../cli/app.py"]}, "outputs": {}},
        name="bad.jsonl",
    )
    with pytest.raises(DatasetError, match="line 1: inputs.data"):
        load_dataset(bad)


def test_an_empty_or_missing_dataset_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no examples"):
        load_dataset(write(tmp_path, ""))
    with pytest.raises(DatasetError, match="cannot read"):
        load_dataset(tmp_path / "nope.jsonl")


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, {**example(), "id": "a"}, {**example(), "id": "a"})
    with pytest.raises(DatasetError, match="line 2: id: 'a' is already the id of line 1"):
        load_dataset(path)


def test_a_langsmith_dataset_is_checked_like_a_file(tmp_path: Path, monkeypatch) -> None:
    import datetime
    import uuid

    from langsmith.schemas import Example

    from planexec.evaluation import langsmith_dataset

    dataset_id = uuid.uuid4()

    def made(inputs: dict[str, object], outputs: dict[str, object]) -> Example:
        return Example(id=uuid.uuid4(), dataset_id=dataset_id, inputs=inputs, outputs=outputs,
                       created_at=datetime.datetime.now(datetime.UTC))  # fmt: skip

    class Client:
        def __init__(self, *examples: Example) -> None:
            self.examples = examples

        def list_examples(self, dataset_name: str) -> list[Example]:
            assert dataset_name == "sales"
            return list(self.examples)

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sales.csv").write_text("a\n1\n")
    good = made({"task": "t", "data": ["sales.csv"]}, {"tools": ["load_csv"]})
    (found,) = langsmith_dataset("sales", Client(good))
    assert found.id == str(good.id) and found.data == [tmp_path / "sales.csv"]
    assert found.metadata["langsmith_dataset_id"] == str(dataset_id)
    bad = made({"task": "t", "data": ["/etc/passwd"]}, {})
    with pytest.raises(DatasetError, match="LangSmith dataset 'sales', example 2: inputs.data"):
        langsmith_dataset("sales", Client(good, bad))
