"""Every ```python block of the README and the docs' pages runs as written (guides, concepts).

Each page is one test: its blocks run in order in one namespace, like a notebook's cells, in a
fresh working folder holding what the docs assume is there (``sales.csv`` and
``my-data/sales.csv``: the data of ``planexec demo``; an ``mcp.json`` of the test notes
server). Models are the real OpenAI client pointed at the local OpenAI-compatible test server
(``OPENAI_BASE_URL``), which answers from canned replies (:class:`tests.openai_server.Canned`):
the demo's recorded sales plan (``src/planexec/demo/sales_plan.json``) and the replies of
``examples/your_tools_replies.json``; the local endpoint the docs show
(``http://localhost:11434/v1``) is that server too. No network, no key.

A block that cannot run offline by nature is left out only by a marker on the line before it,
``<!-- not-run: why -->``; :func:`test_blocks_left_out_are_few_and_say_why` counts them.
A ```text block right after a ```python block shows what it prints: each of its lines must be
printed (``...`` lines and lines cut with ``…`` aside). Bash and JSON blocks are not run (the
example program's test runs the shell lines of the "your tools, your model" guide).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import re
import shutil
import sys
import textwrap
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from tests.helpers import DEMO, EXAMPLES, ROOT
from tests.openai_server import Canned, serve

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted((DOCS / "guides").glob("*.md"))]
PAGES += sorted((DOCS / "concepts").glob("*.md"))
"""Every page people read (the reference pages are made from docstrings)."""
NOT_RUN = re.compile(r"<!--\s*not-run:\s*(?P<why>.*?)\s*-->", re.DOTALL)
LOCAL_ENDPOINT = "http://localhost:11434/v1"
"""The local OpenAI-compatible endpoint the docs show (Ollama's): the test server stands in."""
MOST_LEFT_OUT = 3
"""Blocks that may be left out across all pages: keep it small (each needs a reason)."""


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page: where its code starts, its language, why not run."""

    page: Path
    line: int  # 1-based line of the block's first line of code
    language: str
    code: str
    not_run: str | None
    after_python: bool = False
    """A block right after a ```python block (nothing between): a text one shows its output."""

    @property
    def where(self) -> str:
        """``page:line``, as a failure names it."""
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    """Return a page's fenced blocks in order, each with the not-run reason just before it."""
    tokens = MarkdownIt("commonmark").parse(page.read_text(encoding="utf-8"))
    found: list[Block] = []
    for i, token in enumerate(tokens):
        if token.type != "fence" or token.map is None:
            continue
        before = tokens[i - 1] if i else None
        marker = (
            NOT_RUN.fullmatch(before.content.strip())
            if before is not None and before.type == "html_block"
            else None
        )
        found.append(
            Block(
                page=page,
                line=token.map[0] + 2,  # the fence is line map[0] + 1
                language=token.info.split()[0] if token.info.strip() else "",
                code=token.content,
                not_run=marker["why"] if marker else None,
                after_python=before is not None
                and before.type == "fence"
                and before.info.split()[:1] == ["python"],
            )
        )
    return found


def python_blocks(page: Path) -> list[Block]:
    """Return a page's ```python blocks."""
    return [b for b in blocks_of(page) if b.language in {"python", "py"}]


RUN_PAGES = [p for p in PAGES if python_blocks(p)]


def canned_replies() -> list[dict[str, Any]]:
    """The replies the docs' models get: the demo's sales plan, the your-tools replies."""
    sales = json.loads((DEMO / "sales_plan.json").read_text(encoding="utf-8"))
    own = json.loads((EXAMPLES / "your_tools_replies.json").read_text(encoding="utf-8"))
    plan = {"match": r"Task: Analyze sales\.csv", "tool_calls": [{"name": "Plan", "args": sales}]}
    return [plan, *(own["replies"] if isinstance(own, dict) else own)]


@pytest.fixture
def page_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working folder with the files the docs assume are in the current folder."""
    folder = tmp_path / "page"
    (folder / "my-data").mkdir(parents=True)
    shutil.copy(DEMO / "sales.csv", folder / "sales.csv")
    shutil.copy(DEMO / "sales.csv", folder / "my-data" / "sales.csv")
    notes = {"command": sys.executable, "args": ["-m", "tests.mcp_servers.notes"], "cwd": str(ROOT)}
    (folder / "mcp.json").write_text(json.dumps({"mcpServers": {"notes": notes}}))
    monkeypatch.chdir(folder)
    return folder


@dataclass(frozen=True)
class ModelServer:
    """The local OpenAI-compatible server the docs' models reach, and its canned replies."""

    url: str
    canned: Canned


@pytest.fixture
def docs_model_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    """Point ``openai:`` models at the local server, answering from the canned replies."""
    canned = Canned(canned_replies())
    with serve(canned) as (url, _requests):
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("OPENAI_API_KEY", "docs-test-key-not-secret")
        yield ModelServer(url, canned)


def run_block(block: Block, namespace: dict[str, Any], server_url: str) -> None:
    """Run one block in ``namespace``; tracebacks name the page and its real line numbers.

    The local endpoint the docs show (:data:`LOCAL_ENDPOINT`, Ollama's) is the test server.
    """
    code = textwrap.dedent(block.code).replace(LOCAL_ENDPOINT, server_url)
    source = "\n" * (block.line - 1) + code
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT  # a block may ``await`` at the top, as in Jupyter
    # dont_inherit: a page's code runs without this module's `from __future__ import annotations`
    code = compile(
        source, str(block.page.relative_to(ROOT)), "exec", flags=flags, dont_inherit=True
    )
    result = eval(code, namespace)  # the docs' own code: the point
    if asyncio.iscoroutine(result):
        asyncio.run(result)


@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_python_blocks_of_a_page_run_as_written(
    page: Path, page_folder: Path, docs_model_server: ModelServer
) -> None:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    printed = io.StringIO()
    for number, block in enumerate(blocks_of(page), 1):
        if block.language == "text" and block.after_python:
            check_shown_output(block, printed.getvalue())
        if block.language not in {"python", "py"} or block.not_run is not None:
            continue
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                run_block(block, namespace, docs_model_server.url)
        except Exception as exc:  # any failure, reported with its place
            failure = "".join(traceback.format_exception(exc)[-12:])
        else:
            continue
        unanswered = docs_model_server.canned.unanswered
        pytest.fail(
            f"{block.where}: block {number} of the page failed:\n{failure}"
            + (f"\nmodel requests no canned reply answered: {unanswered}" if unanswered else "")
            + f"\nit printed:\n{printed.getvalue()[-2000:]}",
            pytrace=False,
        )


def check_shown_output(block: Block, printed: str) -> None:
    """A ```text block right after a python block shows lines that block printed.

    Lines starting with ``...`` and lines cut short with ``…`` are left out of the check
    (steps that run at the same time print in any order, so only each line is checked).
    """
    lines = set(printed.splitlines())
    shown = [
        line
        for line in block.code.splitlines()
        if line.strip() and not line.strip().startswith("...") and "…" not in line
    ]
    missing = [line for line in shown if line not in lines]
    if missing:
        pytest.fail(
            f"{block.where}: the output shown is not what the block before it printed; "
            f"not printed: {missing}\nit printed:\n{printed[-2000:]}",
            pytrace=False,
        )


def test_blocks_left_out_are_few_and_say_why() -> None:
    left_out = [b for p in PAGES for b in python_blocks(p) if b.not_run is not None]
    print("\n".join(f"not run: {b.where}: {b.not_run}" for b in left_out))
    assert all(b.not_run for b in left_out), "a not-run marker says why"
    assert len(left_out) <= MOST_LEFT_OUT, [b.where for b in left_out]
    marked = [b for p in PAGES for b in blocks_of(p) if b.not_run is not None]
    assert [b.where for b in marked] == [b.where for b in left_out], "only python blocks"


def test_the_pages_run_include_the_readme_and_the_your_tools_guide() -> None:
    names = {str(p.relative_to(ROOT)) for p in RUN_PAGES}
    assert {"README.md", "docs/guides/your-tools-your-model.md"} <= names
