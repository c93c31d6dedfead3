"""A recording's files: safe names, the same bytes for the same calls, atomic concurrent writes,
and reading that refuses hand-edited, huge or escaping files with an error naming the file."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from planexec import Recording
from planexec.errors import ConfigurationError, ToolError
from planexec.recording import NoRecordingError, RecordingError


def record(folder: Path, tool: str, args: dict, output: object) -> None:
    Recording(folder, "record").keep_tool(tool, args, output, secrets=[])


def replay(folder: Path, tool: str, args: dict) -> object:
    return Recording(folder, "replay").replay_tool(tool, args, secrets=[])


def test_a_recorded_output_is_served_and_files_are_plain_sorted_json(tmp_path):
    record(tmp_path, "load_csv", {"path": "a.csv", "sep": ","}, {"rows": 3, "columns": ["x"]})
    assert replay(tmp_path, "load_csv", {"sep": ",", "path": "a.csv"}) == {
        "rows": 3,
        "columns": ["x"],
    }
    (file,) = (tmp_path / "steps" / "load_csv").glob("*.json")
    data = json.loads(file.read_text())
    assert data == {
        "tool": "load_csv",
        "args": {"path": "a.csv", "sep": ","},
        "output": {"rows": 3, "columns": ["x"]},
    }
    text = file.read_text()
    assert text.index('"args"') < text.index('"output"') < text.index('"tool"')  # sorted keys


def test_the_same_calls_give_the_same_bytes(tmp_path):
    for name in ("one", "two"):
        record(tmp_path / name, "t", {"b": 1, "a": [1, 2]}, {"z": 1, "y": "é"})
        Recording(tmp_path / name, "record").keep_tool("t", {"a": 3}, "x", secrets=[])
    one, two = (
        {p.relative_to(tmp_path / n): p.read_bytes() for p in (tmp_path / n).rglob("*.json")}
        for n in ("one", "two")
    )
    assert one == two and len(one) == 2


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "/etc/passwd", "c:\\x", "x" * 400, ""])
def test_a_tool_name_never_escapes_the_folder(tmp_path, name):
    folder = tmp_path / "rec"
    record(folder, name, {"n": 1}, "out")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all(p.is_relative_to(folder / "steps") for p in written), written
    assert all(len(p.name) < 200 and len(p.parent.name) < 200 for p in written)
    assert replay(folder, name, {"n": 1}) == "out"


def test_a_missing_call_names_the_nearest_recording(tmp_path):
    record(tmp_path, "load_csv", {"path": "a.csv", "sep": ","}, 1)
    record(tmp_path, "load_csv", {"path": "z.csv", "sep": ";"}, 2)
    with pytest.raises(NoRecordingError) as caught:
        replay(tmp_path, "load_csv", {"path": "b.csv", "sep": ","})
    assert str(caught.value) == (
        "no recording of load_csv with these arguments; nearest recording differs in path: "
        "recorded 'a.csv', now 'b.csv'"
    )
    assert isinstance(caught.value, ToolError)
    with pytest.raises(NoRecordingError, match=r"^no recording of tool other$"):
        replay(tmp_path, "other", {})
    with pytest.raises(NoRecordingError, match=r"differs in extra: recorded \(absent\), now 1"):
        replay(tmp_path, "load_csv", {"path": "a.csv", "sep": ",", "extra": 1})


def test_concurrent_writes_leave_whole_files_and_no_temporaries(tmp_path):
    recording = Recording(tmp_path, "record")

    def write(i: int) -> None:
        for j in range(20):
            recording.keep_tool("t", {"i": i % 3, "j": j % 4}, {"i": i % 3, "j": j % 4}, secrets=[])

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    files = list((tmp_path / "steps" / "t").iterdir())
    assert len(files) == 12 and all(f.suffix == ".json" for f in files), files
    for f in files:
        data = json.loads(f.read_text())
        assert data["output"] == data["args"]


def recorded_file(folder: Path) -> Path:
    record(folder, "t", {"a": 1}, "out")
    (file,) = (folder / "steps" / "t").glob("*.json")
    return file


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{not json", "is not valid JSON"),
        ('["a list"]', "is not a recording"),
        ('{"tool": "t", "args": {"a": 1}}', "is not a recording"),
        ('{"tool": 3, "args": {"a": 1}, "output": 1}', "is not a recording"),
    ],
)
def test_a_file_edited_into_nonsense_is_named(tmp_path, content, said):
    file = recorded_file(tmp_path)
    file.write_text(content)
    with pytest.raises(RecordingError, match=said) as caught:
        replay(tmp_path, "t", {"a": 1})
    assert str(file) in str(caught.value)


def test_a_huge_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from planexec.recording import files

    file = recorded_file(tmp_path)
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 100)
    file.write_text(json.dumps({"tool": "t", "args": {"a": 1}, "output": "x" * 1000}))
    with pytest.raises(RecordingError, match="bytes") as caught:
        replay(tmp_path, "t", {"a": 1})
    assert str(file) in str(caught.value)


def test_a_link_out_of_the_folder_is_refused(tmp_path):
    folder = tmp_path / "rec"
    file = recorded_file(folder)
    outside = tmp_path / "outside.json"
    outside.write_text(file.read_text())
    file.unlink()
    os.symlink(outside, file)
    with pytest.raises(RecordingError, match="outside") as caught:
        replay(folder, "t", {"a": 1})
    assert str(file) in str(caught.value)


def test_a_hand_edited_output_is_served(tmp_path):
    file = recorded_file(tmp_path)
    data = json.loads(file.read_text())
    file.write_text(json.dumps({**data, "output": "edited"}))
    assert replay(tmp_path, "t", {"a": 1}) == "edited"


def test_a_hand_edited_output_is_made_storable(tmp_path):
    file = recorded_file(tmp_path)
    big = 2**70
    file.write_text(
        '{"tool": "t", "args": {"a": 1}, "output": [NaN, "a\\u0000b", 1e999, ' + f"{big}]}}"
    )
    assert replay(tmp_path, "t", {"a": 1}) == [None, "a\ufffdb", None, str(2**70)]


def test_a_failure_is_replayed_but_never_replaces_a_success(tmp_path):
    recording = Recording(tmp_path, "record")
    recording.keep_tool_failure("t", {"a": 1}, "ValueError: no", transient=False, secrets=[])
    with pytest.raises(ToolError, match="^ValueError: no$"):
        replay(tmp_path, "t", {"a": 1})
    recording.keep_tool("t", {"a": 1}, "fine", secrets=[])
    recording.keep_tool_failure("t", {"a": 1}, "ConnectionError", transient=True, secrets=[])
    assert replay(tmp_path, "t", {"a": 1}) == "fine"


def test_secrets_are_scrubbed_from_everything_written(tmp_path):
    secret = "sk-unit-SECRET-123456"
    Recording(tmp_path, "record").keep_tool(
        f"tool-{secret}", {"key": secret, secret: 1}, {"out": secret}, secrets=[secret]
    )
    for path in tmp_path.rglob("*"):
        assert secret not in str(path)
        if path.is_file():
            assert secret.encode() not in path.read_bytes()


def test_modes_and_folders_are_checked(tmp_path):
    with pytest.raises(ConfigurationError, match="record.*replay"):
        Recording(tmp_path, "rewind")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="nothing"):
        Recording(tmp_path / "absent", "replay")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigurationError, match="not a folder"):
        Recording(tmp_path / "file", "record")


# --- arguments compared as typed JSON; changed arguments never collide (issue 36, R2) ------


@pytest.mark.parametrize(
    ("recorded", "asked"),
    [(True, 1), (1, 1.0), ([True], [1]), (0, False), (1.0, 1)],
)
def test_arguments_are_compared_with_their_json_types(tmp_path, recorded, asked):
    record(tmp_path, "t", {"v": recorded}, "served")
    with pytest.raises(NoRecordingError, match="differs in v"):
        replay(tmp_path, "t", {"v": asked})
    assert replay(tmp_path, "t", {"v": recorded}) == "served"


def test_a_tuple_is_the_same_call_as_a_list(tmp_path):
    record(tmp_path, "t", {"v": (1, 2)}, "served")
    assert replay(tmp_path, "t", {"v": [1, 2]}) == "served"


SECRET = "sk-unit-ARGSECRET-98765"


@pytest.mark.parametrize(
    ("recorded", "asked"),
    [
        (2**70, str(2**70)),
        ("a\x00", "a\ufffd"),
        (float("nan"), None),
        (SECRET, "[redacted]"),
    ],
    ids=["huge int", "NUL", "NaN", "secret"],
)
def test_an_argument_changed_to_be_kept_never_matches_what_it_was_changed_into(
    tmp_path, recorded, asked
):
    Recording(tmp_path, "record").keep_tool("t", {"v": recorded}, "served", secrets=[SECRET])
    with pytest.raises(NoRecordingError):
        Recording(tmp_path, "replay").replay_tool("t", {"v": asked}, secrets=[SECRET])
    again = Recording(tmp_path, "replay").replay_tool("t", {"v": recorded}, secrets=[SECRET])
    assert again == "served"  # the same call (the same secret, the same NaN) still replays


def test_values_that_look_the_same_are_told_apart_in_the_message(tmp_path):
    record(tmp_path, "t", {"v": "caf\u00e9"}, 1)
    with pytest.raises(NoRecordingError) as caught:
        replay(tmp_path, "t", {"v": "cafe\u0301"})
    assert "recorded 'caf\\xe9', now 'cafe\\u0301'" in str(caught.value)


# --- folders, hand-edited files ----------------------------------------------------------


def test_no_folder_is_made_outside_the_recording_before_refusing(tmp_path):
    folder, outside = tmp_path / "rec", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (folder / "steps").symlink_to(outside)
    with pytest.raises(RecordingError, match="outside"):
        record(folder, "tool_x", {"a": 1}, "out")
    assert list(outside.iterdir()) == []


def test_duplicate_keys_in_a_file_are_refused_naming_it(tmp_path):
    file = recorded_file(tmp_path)
    file.write_text('{"tool": "t", "args": {"a": 1}, "output": "shown", "output": "served"}')
    with pytest.raises(RecordingError, match="duplicate key 'output'") as caught:
        replay(tmp_path, "t", {"a": 1})
    assert str(file) in str(caught.value)


def test_a_bad_entry_does_not_turn_every_miss_into_an_error(tmp_path):
    record(tmp_path, "t", {"a": 1}, "out")
    (tmp_path / "steps" / "t" / "junk.json").mkdir()
    with pytest.raises(NoRecordingError) as caught:
        replay(tmp_path, "t", {"a": 2})
    said = str(caught.value)
    assert "nearest recording differs in a: recorded 1, now 2" in said
    assert "junk.json" in said and "skipped" in said
    assert replay(tmp_path, "t", {"a": 1}) == "out"


def test_an_output_too_deep_to_keep_names_its_file(tmp_path):
    file = recorded_file(tmp_path)
    deep: object = 1
    for _ in range(70):
        deep = [deep]
    file.write_text(json.dumps({"tool": "t", "args": {"a": 1}, "output": deep}))
    with pytest.raises(RecordingError, match="cannot be stored") as caught:
        replay(tmp_path, "t", {"a": 1})
    assert str(file) in str(caught.value)


def test_two_files_of_the_same_call_are_refused_naming_both(tmp_path):
    file = recorded_file(tmp_path)
    copy = file.with_name("copy.json")
    copy.write_text(file.read_text().replace('"out"', '"other"'))
    with pytest.raises(RecordingError) as caught:
        replay(tmp_path, "t", {"a": 1})
    assert str(file) in str(caught.value) and str(copy) in str(caught.value)


def test_parts_never_share_a_folder_whatever_the_case_or_a_crafted_name(tmp_path):
    from planexec.recording.recorder import part_name

    names = ["Sales", "sales", "x y", "x_y-887fcea6a803", ".", "..", "a" * 300, "trend-report"]
    folders = [part_name(n) for n in names]
    assert len({f.lower() for f in folders}) == len(names), folders  # a case-blind disk too
    assert part_name("trend-report") == "trend-report"  # a plain id is its folder
    assert all("/" not in f and f not in {".", ".."} for f in folders)


def test_a_part_that_is_a_link_out_of_the_recording_is_refused(tmp_path):
    from planexec.errors import ConfigurationError

    outside = tmp_path / "outside"
    outside.mkdir()
    root = Recording(tmp_path / "rec", "record")
    (tmp_path / "rec" / "ex").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigurationError, match="link"):
        root.part("ex")
    assert list(outside.iterdir()) == []
