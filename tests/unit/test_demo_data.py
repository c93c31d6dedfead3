"""The demo's data and recorded plan are stored once: in the package, where ``planexec demo``
reads them (tests, benchmarks and notebooks read them there too)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import DEMO, ROOT

SEARCHED = ("examples", "tests", "bench", "docs", "notebooks", "src")
"""The folders of the repository a copy could hide in (not .venv, caches or run folders)."""


def copies_of(shipped: Path, root: Path) -> list[str]:
    """Files and links under ``root``'s searched folders, outside the package's demo folder,
    named like ``shipped`` or holding its bytes."""
    data = shipped.read_bytes()
    home = root / "src" / "planexec" / "demo"
    found = []
    for top in SEARCHED:
        for path in sorted((root / top).rglob("*")):
            if path.parent == home or (path.is_dir() and not path.is_symlink()):
                continue
            same_size = path.is_file() and path.stat().st_size == len(data)
            if path.name == shipped.name or (same_size and path.read_bytes() == data):
                found.append(str(path.relative_to(root)))
    return found


def test_the_demo_data_and_plan_are_stored_once_in_the_package():
    shipped = sorted(p.name for p in DEMO.iterdir() if p.is_file())
    assert shipped == ["sales.csv", "sales_plan.json"]
    for name in shipped:
        assert copies_of(DEMO / name, ROOT) == [], name
