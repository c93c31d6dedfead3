from __future__ import annotations

import hashlib
import os

import pytest

from planexec.storage.outputs import OutputFileError, OutputStore, output_of
from planexec.tools.sandbox import check_name, check_thread_id


def test_a_spill_reads_back_only_as_written(tmp_path):
    store = OutputStore(tmp_path / "outputs")
    text = '{"rows": [1, 2, 3], "name": "h\u00e9"}'
    ref = store.save(text, "preview")
    data = text.encode()
    assert ref == {
        "id": ref["id"],
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "preview": "preview",
    }
    assert output_of({"output": None, "output_file": ref}, store) == {
        "rows": [1, 2, 3],
        "name": "h\u00e9",
    }
    assert store.save(text, "p")["id"] != ref["id"]  # every spill gets its own file
    assert oct((tmp_path / "outputs").stat().st_mode)[-3:] == "700"
    assert [p.name for p in (tmp_path / "outputs").iterdir() if p.name.startswith(".")] == []

    path = tmp_path / "outputs" / f"{ref['id']}.json"
    path.write_text(text.replace("1", "9"))
    with pytest.raises(OutputFileError, match="changed after it was written"):
        output_of({"output_file": ref}, store)
    path.write_text(text + " ")
    with pytest.raises(OutputFileError, match="changed"):
        output_of({"output_file": ref}, store)
    path.unlink()
    with pytest.raises(OutputFileError, match="cannot be read"):
        output_of({"output_file": ref}, store)
    (tmp_path / "elsewhere.json").write_text(text)
    path.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(OutputFileError, match="cannot be read"):
        output_of({"output_file": ref}, store)


@pytest.mark.parametrize(
    "ref",
    [
        {"id": "../../etc/passwd", "bytes": 1, "sha256": "0" * 64},
        {"id": "0" * 32, "bytes": -1, "sha256": "0" * 64},
        {"id": "0" * 32, "bytes": "1", "sha256": "0" * 64},
        {"id": "0" * 32, "bytes": 1, "sha256": "../x"},
        {"id": "0" * 31, "bytes": 1, "sha256": "0" * 64},
        {},
        "0" * 32,
    ],
)
def test_malformed_output_file_records_are_refused(tmp_path, ref):
    with pytest.raises(OutputFileError, match="malformed"):
        output_of({"output": "inline", "output_file": ref}, OutputStore(tmp_path))


def test_inline_outputs_are_returned_as_they_are(tmp_path):
    forged = {"$ref": "config.json", "bytes": 1, "preview": ""}
    assert output_of({"output": forged}, OutputStore(tmp_path)) == forged
    assert output_of({"output": None, "output_file": None}, OutputStore(tmp_path)) is None


@pytest.mark.parametrize("name", ["sales", "team/sales", "a.b_c-d", "A1/b2/c3", "x" * 128, "_x"])
def test_good_workspace_names(name):
    assert "/".join(check_name(name)) == name


@pytest.mark.parametrize("thread_id", ["0b8f6a9e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "sales-1", 7])
def test_good_thread_ids(thread_id):
    assert check_thread_id(thread_id) == str(thread_id)


def test_spill_folder_is_private(tmp_path):
    old = os.umask(0)
    try:
        OutputStore(tmp_path / "o").save("1", "1")
    finally:
        os.umask(old)
    assert oct((tmp_path / "o").stat().st_mode)[-3:] == "700"
    assert oct(next((tmp_path / "o").iterdir()).stat().st_mode)[-3:] == "600"
