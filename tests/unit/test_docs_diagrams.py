"""Diagrams of the graph in the docs are the graph: exactly what ``draw_mermaid()`` draws now.

A ```` ```mermaid ```` block right after the line ``<!-- graph: draw_mermaid -->`` (in README.md
or any page under docs/) claims to be the served graph, and must equal
``build_graph().get_graph().draw_mermaid()``; a Mermaid block that draws the graph's
``__start__`` node without that mark is refused too, so no unchecked copy can go stale. After a
change to the graph, rewrite every marked block with::

    PYTHONPATH=src .venv/bin/python tests/unit/test_docs_diagrams.py --write
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- graph: draw_mermaid -->"
FENCE = "```mermaid"


def documents() -> list[Path]:
    """Return README.md and every Markdown page of the docs site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def drawn(workspace_root: Path) -> str:
    """Return the served graph's Mermaid text, as LangGraph draws it (no trailing newline)."""
    from planexec import build_graph

    return build_graph(workspace_root=workspace_root).get_graph().draw_mermaid().rstrip("\n")


def mermaid_blocks(text: str) -> list[tuple[bool, int, int]]:
    """Return each Mermaid block as (marked, first line, end line): its body is lines[first:end]."""
    lines = text.split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != FENCE:
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"line {i + 1}: a ```mermaid block that never closes"
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        blocks.append((previous.strip() == MARK, i + 1, end))
    return blocks


def unplaced_marks(text: str) -> list[int]:
    """Return the line numbers of marks not followed by a Mermaid block."""
    lines = text.split("\n")
    wrong = []
    for i, line in enumerate(lines):
        if line.strip() == MARK:
            following = next((n for n in lines[i + 1 :] if n.strip()), "")
            if following.strip() != FENCE:
                wrong.append(i + 1)
    return wrong


def test_every_diagram_of_the_graph_is_what_draw_mermaid_draws(tmp_path):
    expected = drawn(tmp_path)
    assert "failure_review" in expected  # the graph this test was written against, at least
    checked: list[str] = []
    for path in documents():
        text = path.read_text(encoding="utf-8")
        name = str(path.relative_to(ROOT))
        assert unplaced_marks(text) == [], f"{name}: {MARK} must come right before ```mermaid"
        lines = text.split("\n")
        for marked, first, end in mermaid_blocks(text):
            body = "\n".join(lines[first:end])
            if not marked:
                assert "__start__" not in body, (
                    f"{name}, line {first}: a diagram of the graph without {MARK} above it"
                )
                continue
            assert body == expected, (
                f"{name}, line {first}: the diagram differs from draw_mermaid(); rewrite it with "
                "`PYTHONPATH=src .venv/bin/python tests/unit/test_docs_diagrams.py --write`"
            )
            checked.append(name)
    assert "docs/concepts/graph.md" in checked  # the graph's own page draws it


def test_a_stale_diagram_is_caught(tmp_path):
    expected = drawn(tmp_path)
    stale = expected.replace("\tevaluator -.-> failure_review;\n", "")
    text = f"intro\n\n{MARK}\n{FENCE}\n{stale}\n```\n"
    ((marked, first, end),) = mermaid_blocks(text)
    assert marked and "\n".join(text.split("\n")[first:end]) != expected
    assert unplaced_marks(f"{MARK}\n\ntext\n") == [1]


def write() -> None:
    """Rewrite every marked block with what ``draw_mermaid()`` draws now."""
    with tempfile.TemporaryDirectory() as folder:
        expected = drawn(Path(folder))
    for path in documents():
        lines = path.read_text(encoding="utf-8").split("\n")
        for marked, first, end in reversed(mermaid_blocks("\n".join(lines))):
            if marked:
                lines[first:end] = expected.split("\n")
        path.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    write()
