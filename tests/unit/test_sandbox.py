"""Property tests of the sandbox boundary: any name or thread id is refused or stays inside."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planexec.tools.sandbox import SHARED, THREADS, Sandbox, SandboxError
from tests.strategies import examples

SETTINGS = settings(
    max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
ROOT = Path("/srv/planexec-root")
BOX = Sandbox.at(ROOT)

pieces = st.sampled_from(
    ["", ".", "..", "/", "\\", "~", "a", "B9", "_", "-", ".x", "x.", "\x00", "\n", "C:", "é", " "]
)
hostile = st.one_of(
    st.text(max_size=40),
    st.lists(pieces, max_size=8).map("".join),
    st.lists(st.one_of(pieces, st.text(max_size=3)), max_size=6).map("/".join),
)


def inside(path: Path, folder: Path) -> bool:
    normal = Path(os.path.normpath(path))
    return normal == path and normal.is_relative_to(folder) and normal != folder


@SETTINGS
@given(hostile)
def test_any_workspace_name_is_refused_or_stays_below_shared(name):
    try:
        path = BOX.workspace_path(name, None)
    except SandboxError:
        return
    assert inside(path, ROOT / SHARED)
    assert all(part[0] not in ".-" for part in path.relative_to(ROOT / SHARED).parts)


@SETTINGS
@given(st.one_of(hostile, st.integers(), st.none(), st.booleans(), st.floats()))
def test_any_thread_id_is_refused_or_names_one_folder_of_its_own(thread_id):
    try:
        path = BOX.workspace_path(None, thread_id)
    except SandboxError:
        return
    assert inside(path, ROOT / THREADS) and path.parent == ROOT / THREADS
    assert path.name == str(thread_id)
