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
    (found,) = langsmith_dataset("sales", Client(good), data_dir=tmp_path)
    assert found.id == str(good.id) and found.data == [tmp_path / "sales.csv"]
    assert found.metadata["langsmith_dataset_id"] == str(dataset_id)
    bad = made({"task": "t", "data": ["/etc/passwd"]}, {})
    with pytest.raises(DatasetError, match="LangSmith dataset 'sales', example 2: inputs.data"):
        langsmith_dataset("sales", Client(good, bad), data_dir=tmp_path)


def test_a_json_line_may_hold_unicode_line_separators_and_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    lines = [json.dumps({"inputs": {"task": f"a{sep}b"}}, ensure_ascii=False)
             for sep in ("\u2028", "\u0085", "\x0c")]  # fmt: skip
    path.write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode("utf-8"))
    examples = load_dataset(path)
    assert [e.inputs.task for e in examples] == ["a\u2028b", "a\u0085b", "a\x0cb"]
    assert [e.id for e in examples] == ["1", "2", "3"]


@pytest.mark.parametrize("where", ["metadata", "args", "context"])
def test_a_value_nested_too_deeply_is_refused_at_load(tmp_path: Path, where: str) -> None:
    nest: object = []
    for _ in range(300):
        nest = [nest]
    line = {
        "metadata": {"inputs": {"task": "t"}, "metadata": {"m": nest}},
        "args": {"inputs": {"task": "t"},
                 "outputs": {"trajectory": {"steps": [{"tool": "x", "args": {"a": nest}}]}}},
        "context": {"inputs": {"task": "t", "context": {"max_steps": nest}}},
    }[where]  # fmt: skip
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(DatasetError, match="line 1: .*nested more than") as caught:
        load_dataset(path)
    assert "\n" not in str(caught.value)


def test_prices_are_the_operators_not_the_datasets(tmp_path: Path) -> None:
    prices = {"openai:gpt-4.1": {"input": 0, "output": 0}}
    path = write(tmp_path, {"inputs": {"task": "t", "context": {"model_prices": prices}}})
    with pytest.raises(DatasetError, match="line 1: inputs.context: model_prices cannot be set"):
        load_dataset(path)


def test_ids_that_are_one_uuid_are_refused_as_duplicates(tmp_path: Path) -> None:
    from planexec.evaluation import langsmith_example

    same = "12345678-1234-5678-1234-567812345678"
    (first,) = load_dataset(write(tmp_path, {**example(), "id": same}))
    assert str(langsmith_example(first).id) == same
    # another spelling of the same UUID is an id of its own, never that UUID
    (braced,) = load_dataset(write(tmp_path, {**example(), "id": "{" + same.upper() + "}"}))
    assert str(langsmith_example(braced).id) != same


def test_a_langsmith_datasets_files_come_from_the_folder_given(tmp_path: Path, monkeypatch) -> None:
    import datetime
    import uuid

    from langsmith.schemas import Example

    from planexec.evaluation import langsmith_dataset

    class Client:
        def __init__(self, data: list[str]) -> None:
            self.data = data

        def list_examples(self, dataset_name: str) -> list[Example]:
            return [Example(id=uuid.uuid4(), dataset_id=uuid.uuid4(),
                            inputs={"task": "t", "data": self.data}, outputs={},
                            created_at=datetime.datetime.now(datetime.UTC))]  # fmt: skip

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".netrc").write_text("machine x password y\n")
    with pytest.raises(DatasetError, match=r"example 1: inputs.data.0: .*--data-dir"):
        langsmith_dataset("team", Client([".netrc"]))
    (found,) = langsmith_dataset("team", Client(["planexec:demo/sales.csv"]))
    assert found.data[0].name == "sales.csv"
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "sales.csv").write_text("a\n1\n")
    (found,) = langsmith_dataset("team", Client(["sales.csv"]), data_dir=tmp_path / "files")
    assert found.data == [tmp_path / "files" / "sales.csv"]
    with pytest.raises(DatasetError, match="outside"):
        langsmith_dataset("team", Client(["../.netrc"]), data_dir=tmp_path / "files")
