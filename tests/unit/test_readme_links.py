"""The README's links into the docs lead somewhere (mkdocs build --strict checks the docs' own)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_relative_link_of_the_readme_names_a_file_of_the_repository():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t for t in LINK.findall(text) if "://" not in t and not t.startswith("#")]
    assert targets, "the README links into the docs"
    missing = [t for t in targets if not (ROOT / t.split("#", 1)[0]).is_file()]
    assert missing == []


def test_the_readme_keeps_the_two_commands_ci_runs_first():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    install = 'python3 -m venv .venv && .venv/bin/pip install -e ".[dev]"'
    install += " && .venv/bin/planexec demo --yes"
    first_block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    assert first_block == f"{install}\n.venv/bin/python -m pytest -n 2\n"
    assert len(text.splitlines()) <= 250
