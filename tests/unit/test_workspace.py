from __future__ import annotations

import os

import pytest

from planexec.errors import WorkspaceError
from planexec.tools.files import list_files, read_file, write_file
from planexec.tools.workspace import Workspace, use_workspace


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "inside.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    return root


@pytest.mark.parametrize(
    "path", ["../secret.txt", "a/../../secret.txt", "/etc/passwd", "", "a\x00b"]
)
def test_paths_outside_are_refused(ws, path):
    with pytest.raises(WorkspaceError):
        Workspace(ws).resolve(path)


def test_symlinks_leading_out_are_refused(ws, tmp_path):
    (ws / "link.txt").symlink_to(tmp_path / "secret.txt")
    (ws / "dirlink").symlink_to(tmp_path)
    with use_workspace(ws):
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            read_file.invoke({"path": "link.txt"})
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            write_file.invoke({"path": "dirlink/new.txt", "content": "x"})
    assert not (tmp_path / "new.txt").exists()


def test_hard_links_and_special_files_are_refused(ws, tmp_path):
    os.link(tmp_path / "secret.txt", ws / "hard.txt")
    os.mkfifo(ws / "pipe")
    with use_workspace(ws):
        with pytest.raises(WorkspaceError, match="hard link"):
            read_file.invoke({"path": "hard.txt"})
        with pytest.raises(WorkspaceError, match="not a regular file"):
            read_file.invoke({"path": "pipe"})


def test_file_tools_work_inside(ws):
    with use_workspace(ws):
        assert write_file.invoke({"path": "sub/new.txt", "content": "hé"}) == {
            "path": "sub/new.txt",
            "bytes": 3,
        }
        assert read_file.invoke({"path": "sub/new.txt"})["content"] == "hé"
        assert list_files.invoke({})["files"] == ["inside.txt", "sub/new.txt"]


def test_tools_need_a_workspace():
    with pytest.raises(WorkspaceError, match="no workspace"):
        read_file.invoke({"path": "x"})


def test_listing_skips_links_and_planexec_files_and_truncates_exactly(ws, tmp_path):
    from planexec.nodes.planner import MAX_LISTED_FILES, workspace_files
    from planexec.tools.files import MAX_LISTED

    (ws / ".planexec" / "outputs").mkdir(parents=True)
    (ws / ".planexec" / "outputs" / "hidden.json").write_text("{}")
    (ws / "link.txt").symlink_to(tmp_path / "secret.txt")
    (ws / "out").symlink_to(tmp_path, target_is_directory=True)
    (ws / "data").mkdir()
    for i in range(MAX_LISTED - 1):
        (ws / "data" / f"f{i:04}.csv").write_text("x")
    with use_workspace(ws):
        listed = list_files.invoke({})
        assert listed["files"][0] == "inside.txt" and len(listed["files"]) == MAX_LISTED
        assert listed["truncated"] is False
        assert all(
            ".planexec" not in f and "link" not in f and not f.startswith("out/")
            for f in listed["files"]
        )
        assert list_files.invoke({"pattern": "*.txt"})["files"] == ["inside.txt"]
        (ws / "data" / "one-more.csv").write_text("x")
        assert list_files.invoke({})["truncated"] is True
    shown = workspace_files(Workspace(ws)).splitlines()
    assert len(shown) == MAX_LISTED_FILES + 1 and shown[-1] == "- …"
    assert shown[0] == "- inside.txt (6 bytes)"


CHART_IN_A_NOTEBOOK = """
import sys
import matplotlib
matplotlib.use("svg")  # the host's own backend, as a notebook would have set it
from planexec.tools.data import generate_chart
from planexec.tools.workspace import use_workspace
with use_workspace(sys.argv[1]):
    out = generate_chart.invoke({"kind": "bar", "x": "m", "y": "v", "title": "t",
                                 "data": [{"m": "a", "v": 1}, {"m": "b", "v": 2}]})
assert out == {"path": "chart.png", "kind": "bar", "points": 2, "x_label": "m", "y_label": "v"}, out
print(matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules)
"""


def test_a_chart_leaves_the_host_matplotlib_alone(tmp_path):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", CHART_IN_A_NOTEBOOK, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["svg", "False"]  # backend kept, no pyplot figure registry
    assert (tmp_path / "chart.png").read_bytes().startswith(b"\x89PNG")
