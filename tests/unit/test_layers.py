"""The layering in .importlinter covers every unit of planexec, and no two units import each
other (imports made only for type checking aside: they never run)."""

from __future__ import annotations

import configparser
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]


def units_graph(depth: int = 2) -> dict[str, set[str]]:
    """Who imports whom, between top-level units (depth 2) or between all modules (0)."""
    graph = grimp.build_graph("planexec", exclude_type_checking_imports=True)
    top = lambda name: ".".join(name.split(".")[:depth]) if depth else name  # noqa: E731
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        if module == "planexec":
            continue
        edges.setdefault(top(module), set())
        for imported in graph.find_modules_directly_imported_by(module):
            if imported != "planexec" and top(imported) != top(module):
                edges[top(module)].add(top(imported))
    return edges


@pytest.mark.parametrize("depth", [2, 0], ids=["packages", "modules"])
def test_no_two_units_import_each_other(depth):
    edges = units_graph(depth)
    done: set[str] = set()

    def visit(unit: str, path: tuple[str, ...]) -> None:
        assert unit not in path, f"import cycle: {' -> '.join((*path, unit))}"
        if unit in done:
            return
        for imported in sorted(edges[unit]):
            visit(imported, (*path, unit))
        done.add(unit)

    for unit in sorted(edges):
        visit(unit, ())


def test_every_unit_has_its_layer():
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    lines = config["importlinter:contract:layers"]["layers"].split("\n")
    placed = {u.strip() for line in lines for u in line.replace("|", ":").split(":") if u.strip()}
    missing = sorted(set(units_graph()) - placed)
    assert not missing, f"give these a layer in .importlinter: {missing}"


def test_the_top_of_the_package_holds_what_a_user_imports_first():
    top = sorted(p.stem for p in (ROOT / "src" / "planexec").glob("*.py"))
    assert len(top) <= 8, top
