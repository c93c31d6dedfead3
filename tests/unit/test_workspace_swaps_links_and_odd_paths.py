"""Nothing that changes the workspace's tree meanwhile can redirect a file tool.

A process that can rename folders inside the workspace swaps a folder for a link to a folder
outside it (and back), as fast as it can, while the tools as registered run: nothing lands
outside, nothing outside is read or listed, and every refusal is the workspace's own error.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from planexec import default_registry
from planexec.errors import WorkspaceError
from planexec.tools.workspace import Workspace, use_workspace

TOOLS = default_registry()
SWAP_SECONDS = 2.0
CSV = "date,product,revenue\n2025-01-05,A,10\n2025-02-05,B,20\n2025-03-05,A,30\n"
SECRET_CSV = "date,product,revenue\n" + "2025-01-05,SECRET,1\n" * 7


def call(name: str, **args: Any) -> Any:
    return TOOLS.get(name).invoke(args)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with a folder ``sub``, and a folder outside it with the same file names."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    (ws / "sub" / "note.txt").write_text("inside")
    (ws / "sub" / "data.csv").write_text(CSV)
    (outside / "note.txt").write_text("SECRET")
    (outside / "data.csv").write_text(SECRET_CSV)
    (outside / "only-outside.txt").write_text("SECRET")
    return ws, outside


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


class Swapper:
    """Swaps ws/sub for a link to the outside folder and back, on a thread, for SWAP_SECONDS.

    A tool may make a new ``sub`` while the real one is away, and a tool writing into that
    new folder meanwhile can make putting the real one back fail; ``settle`` puts it back
    once the tools are done, when nothing races it.
    """

    def __init__(self, ws: Path, outside: Path) -> None:
        self.sub, self.away, self.outside = ws / "sub", ws / "sub.away", outside
        self.stop = threading.Event()
        self.deadline = time.monotonic() + SWAP_SECONDS
        self.thread = threading.Thread(target=self.swap, daemon=True)

    def restore(self) -> None:
        sub, away = self.sub, self.away
        if sub.is_symlink():
            sub.unlink()
        elif sub.is_dir() and away.is_dir():
            shutil.rmtree(sub)
        if away.is_dir():
            os.rename(away, sub)

    def swap(self) -> None:
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            with contextlib.suppress(OSError):
                os.rename(self.sub, self.away)
            with contextlib.suppress(OSError):
                os.symlink(self.outside, self.sub)
            with contextlib.suppress(OSError):
                self.restore()
            time.sleep(random.random() / 1000)  # the real folder stays a moment, then goes

    def running(self) -> bool:
        return self.thread.is_alive()

    def settle(self) -> None:
        """Stop swapping and put the real folder back; call it when no tool runs."""
        self.stop.set()
        self.thread.join(5)
        assert not self.thread.is_alive(), "the swapper did not stop"
        self.restore()


@pytest.fixture
def swapping(tree: tuple[Path, Path]) -> Iterator[Swapper]:
    """A running ``Swapper`` over the tree; settled again at teardown."""
    swapper = Swapper(*tree)
    swapper.thread.start()
    yield swapper
    with contextlib.suppress(OSError):
        swapper.settle()


CALLS: dict[str, Callable[[], Any]] = {
    "write_file": lambda: call("write_file", path="sub/written.txt", content="mine"),
    "read_file": lambda: call("read_file", path="sub/note.txt"),
    "list_files": lambda: call("list_files", folder="sub"),
    "load_csv": lambda: call("load_csv", path="sub/data.csv"),
    "calculate_stats": lambda: call(
        "calculate_stats", dataset="sub/data.csv", value_column="revenue", date_column="date"
    ),
    "clean_data": lambda: call("clean_data", dataset="sub/data.csv", output_path="sub/c.parquet"),
    "generate_chart": lambda: call(
        "generate_chart",
        kind="bar",
        x="m",
        y="v",
        title="t",
        data=[{"m": "a", "v": 1}, {"m": "b", "v": 2}],
        output_path="sub/chart.png",
    ),
    "write_report": lambda: call("write_report", title="T", output_path="sub/report.md"),
}


def leaked(name: str, out: Any) -> str | None:
    """Say what of the outside folder a tool's output shows, if anything."""
    text = repr(out)
    if "SECRET" in text or "only-outside" in text:
        return f"{name} showed the outside folder: {text[:200]}"
    if name in {"load_csv"} and out.get("rows") != 3:
        return f"{name} read the outside file: {out.get('rows')} rows"
    if name == "calculate_stats" and out.get("rows") != 3:
        return f"{name} read the outside file: {out.get('rows')} rows"
    return None


def test_a_folder_swapped_for_a_link_meanwhile_never_redirects_a_tool(tree, swapping):
    ws, outside = tree
    before = snapshot(outside)
    done: dict[str, int] = dict.fromkeys(CALLS, 0)
    refused: dict[str, int] = dict.fromkeys(CALLS, 0)
    wrong: list[str] = []
    with use_workspace(ws):
        while swapping.running():
            for name, run in CALLS.items():
                try:
                    out = run()
                except WorkspaceError:
                    refused[name] += 1
                except Exception as exc:
                    wrong.append(f"{name} raised {type(exc).__name__}: {exc}"[:300])
                else:
                    done[name] += 1
                    problem = leaked(name, out)
                    if problem:
                        wrong.append(problem)
    assert snapshot(outside) == before, "a write landed outside the workspace"
    assert not wrong, wrong[:5]
    assert sum(done.values()) + sum(refused.values()) > len(CALLS)
    swapping.settle()
    assert (ws / "sub" / "note.txt").read_text() == "inside"
    with use_workspace(ws):  # the tree at rest: every tool works in the folder
        for name, run in CALLS.items():
            assert not leaked(name, run()), name


def test_a_fifo_swapped_in_meanwhile_never_blocks_a_reader(tmp_path):
    """A FIFO renamed over a data file between the check and the open would block the open."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.csv").write_text(CSV)
    os.mkfifo(ws / "pipe")
    (ws / "spare.csv").write_text(CSV)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            for act in (
                lambda: os.rename(ws / "data.csv", ws / "real.csv"),
                lambda: os.rename(ws / "pipe", ws / "data.csv"),
                lambda: os.rename(ws / "data.csv", ws / "pipe"),
                lambda: os.rename(ws / "real.csv", ws / "data.csv"),
            ):
                with contextlib.suppress(OSError):
                    act()

    outcome: dict[str, Any] = {"calls": 0, "wrong": []}

    def read_many() -> None:
        deadline = time.monotonic() + SWAP_SECONDS
        with use_workspace(ws):
            while time.monotonic() < deadline:
                for run in (
                    lambda: call("read_file", path="data.csv"),
                    lambda: call("load_csv", path="data.csv"),
                ):
                    try:
                        run()
                    except WorkspaceError:
                        pass
                    except Exception as exc:
                        outcome["wrong"].append(f"{type(exc).__name__}: {exc}"[:200])
                    outcome["calls"] += 1

    swapper = threading.Thread(target=swap, daemon=True)
    reader = threading.Thread(target=read_many, daemon=True)
    swapper.start()
    reader.start()
    reader.join(SWAP_SECONDS + 20)
    stop.set()
    swapper.join(5)
    if reader.is_alive():  # blocked in open(): unblock it with a writer, then fail
        for name in ("data.csv", "pipe"):
            if (ws / name).exists() and not (ws / name).is_file():
                os.close(os.open(ws / name, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("a reader blocked on a FIFO swapped in for its file")
    assert not outcome["wrong"], outcome["wrong"][:5]
    assert outcome["calls"] > 2


@pytest.fixture
def ws_with_links(tmp_path: Path) -> tuple[Path, Path]:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "target.txt").write_text("SECRET")
    (ws / "inside.txt").write_text("inside")
    (ws / "data.csv").write_text(CSV)
    (ws / "out-link.txt").symlink_to(outside / "target.txt")
    (ws / "in-link.txt").symlink_to(ws / "inside.txt")
    (ws / "dir-link").symlink_to(outside, target_is_directory=True)
    (ws / "dangling.txt").symlink_to(outside / "not-yet.txt")
    os.mkfifo(ws / "pipe")
    return ws, outside


@pytest.mark.parametrize(
    "path",
    ["out-link.txt", "in-link.txt", "dangling.txt", "dir-link/target.txt", "dir-link/new.txt"],
)
def test_links_are_never_followed_by_any_file_tool(ws_with_links, path):
    ws, outside = ws_with_links
    before = snapshot(outside)
    with use_workspace(ws):
        for run in (
            lambda: call("read_file", path=path),
            lambda: call("write_file", path=path, content="mine"),
            lambda: call("load_csv", path=path),
            lambda: call("write_report", title="T", output_path=path),
            lambda: call("clean_data", dataset="data.csv", output_path=path),
        ):
            with pytest.raises(WorkspaceError):
                run()
        if "/" in path:
            with pytest.raises(WorkspaceError):
                call("list_files", folder=path.split("/")[0])
    assert snapshot(outside) == before
    assert not (outside / "not-yet.txt").exists()
    assert (ws / "inside.txt").read_text() == "inside"


def test_special_files_are_refused_without_blocking(ws_with_links):
    ws, _ = ws_with_links
    with use_workspace(ws):
        for run in (
            lambda: call("read_file", path="pipe"),
            lambda: call("load_csv", path="pipe"),
            lambda: call("write_file", path="pipe", content="x"),
            lambda: call("write_file", path="pipe/x.txt", content="x"),
        ):
            with pytest.raises(WorkspaceError):
                run()
        listed = call("list_files")["files"]
    assert listed == ["data.csv", "inside.txt"]  # no link, no FIFO


@pytest.mark.parametrize(
    "path",
    [
        "x" * 300,
        "deep/" + "y" * 300 + "/f.txt",
        "bad\ud800.txt",
        "a/" * 3000 + "f.txt",
    ],
    ids=["long-name", "long-folder", "surrogate", "long-path"],
)
def test_paths_the_system_cannot_take_are_the_workspaces_own_error(tmp_path, path):
    ws = tmp_path / "ws"
    ws.mkdir()
    with use_workspace(ws):
        for run in (
            lambda: call("write_file", path=path, content="x"),
            lambda: call("read_file", path=path),
            lambda: call("list_files", folder=path),
            lambda: call("load_csv", path=path),
            lambda: call("write_report", title="T", output_path=path),
        ):
            with pytest.raises(WorkspaceError):
                run()


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("a b/ünï cödé.txt", "a b/ünï cödé.txt"),
        ("-rf.txt", "-rf.txt"),
        ("new\nline.txt", "new\nline.txt"),
        ("./x//y/./z.txt", "x/y/z.txt"),
        ("back\\slash.txt", "back\\slash.txt"),
        ("raw\udcff.txt", "raw\udcff.txt"),
    ],
)
def test_hard_to_name_paths_are_written_read_and_listed_inside(tmp_path, path, shown):
    ws = tmp_path / "ws"
    ws.mkdir()
    with use_workspace(ws):
        assert call("write_file", path=path, content="hé") == {"path": shown, "bytes": 3}
        assert call("read_file", path=path)["content"] == "hé"
        assert call("list_files")["files"] == [shown]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def test_the_workspace_folder_itself_swapped_for_a_link_is_refused(tmp_path):
    """A shared workspace ``team/sales`` is a folder inside the workspace ``team``: a tool of
    ``team`` may swap it for a link once the run's workspace is made. Found by a hostile review:
    the folder itself was opened by path, following the link."""
    sales, outside = tmp_path / "team" / "sales", tmp_path / "outside"
    sales.mkdir(parents=True)
    outside.mkdir()
    (sales / "note.txt").write_text("inside")
    (outside / "note.txt").write_text("SECRET")
    workspace = Workspace(sales)  # as the round makes it
    sales.rename(tmp_path / "team" / "was-sales")
    sales.symlink_to(outside)
    with use_workspace(workspace):
        for name, args in [
            ("read_file", {"path": "note.txt"}),
            ("list_files", {}),
            ("write_file", {"path": "planted.txt", "content": "x"}),
        ]:
            with pytest.raises(WorkspaceError, match="link"):
                call(name, **args)
    assert sorted(p.name for p in outside.iterdir()) == ["note.txt"]


def test_a_deep_tree_is_listed_without_running_out_of_handles_or_stack(tmp_path):
    """Found by a hostile review: one open handle and one recursion per level."""
    import resource

    deep = "/".join(["d"] * 1200)
    with use_workspace(tmp_path):
        call("write_file", path=f"{deep}/f.txt", content="x")
        call("write_file", path="top.txt", content="x")
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        try:
            listed = call("list_files")
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    shown = json.dumps(listed)
    assert "top.txt" in shown and "f.txt" in shown
    (tmp_path / deep / "f.txt").unlink()  # pytest's clean-up of temp folders recurses per level
    for depth in range(1200, 0, -1):
        (tmp_path / "/".join(["d"] * depth)).rmdir()


@pytest.mark.parametrize("path", ["ro.txt/", "newdir/", "./"])
def test_a_path_ending_in_a_slash_names_a_folder_not_a_file(tmp_path, path):
    (tmp_path / "ro.txt").write_text("inside")
    with use_workspace(tmp_path):
        with pytest.raises(WorkspaceError, match="folder"):
            call("read_file", path=path)
        with pytest.raises(WorkspaceError, match="folder"):
            call("write_file", path=path, content="x")
    assert not (tmp_path / "newdir").exists()


@pytest.mark.parametrize(
    "path", [".planexec/outputs/x.json", ".planexec-0.tmp", "a/.planexec-1.tmp"]
)
def test_planexecs_own_names_cannot_be_written(tmp_path, path):
    with use_workspace(tmp_path), pytest.raises(WorkspaceError, match="planexec keeps"):
        call("write_file", path=path, content="x")


def test_an_overwrite_keeps_the_permissions_but_never_a_setuid_bit(tmp_path):
    target = tmp_path / "tool.sh"
    target.write_text("old")
    target.chmod(0o4755)
    with use_workspace(tmp_path):
        call("write_file", path="tool.sh", content="new")
    assert target.read_text() == "new" and (target.stat().st_mode & 0o7777) == 0o755
