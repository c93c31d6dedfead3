"""Ready to deploy on LangGraph Server: ``langgraph dockerfile`` builds from langgraph.json.

No Docker engine is needed to generate the Dockerfile, so this runs everywhere: the image it
describes starts from LangGraph's API image for the Python version langgraph.json names,
installs this package, and serves every graph langgraph.json lists. The build context
(everything ``ADD .`` copies into the image) keeps out secrets and local run state.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pathspec
import pytest
from packaging.specifiers import SpecifierSet

from tests.helpers import ROOT

CONFIG = json.loads((ROOT / "langgraph.json").read_text())
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# What a developer's checkout may hold that must never be baked into an image layer: keys,
# run databases, workspaces and outputs, dev-server state, virtualenvs, git history.
SECRET_OR_LOCAL = [
    ".env",
    ".env.production",
    "src/planexec/.env",
    "runs.sqlite",
    "runs.sqlite-wal",
    "data/runs.db",
    "planexec-runs/4f1c/log.txt",
    "planexec-workspaces/shared/sales/sales.csv",
    "planexec-demo/output/report.md",
    "planexec-workspace/notes.txt",
    ".langgraph_api/.langgraph_checkpoint.1.pckl",
    ".venv/bin/python",
    ".git/config",
    "tests/conftest.py",
]

IGNORED = pathspec.GitIgnoreSpec.from_lines((ROOT / ".dockerignore").read_text().splitlines())


@pytest.fixture(scope="module")
def dockerfile(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The Dockerfile ``langgraph dockerfile`` writes for the project's langgraph.json."""
    out = tmp_path_factory.mktemp("image") / "Dockerfile"
    cli = Path(sys.executable).with_name("langgraph")
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "1"}
    done = subprocess.run(
        [str(cli), "dockerfile", "-c", str(ROOT / "langgraph.json"), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out.read_text()


def test_the_image_runs_the_python_version_langgraph_json_names(dockerfile):
    version = CONFIG.get("python_version")
    assert version, "langgraph.json names no python_version: the image would pick one"
    assert SpecifierSet(PYPROJECT["requires-python"]).contains(f"{version}.0")
    first = next(line for line in dockerfile.splitlines() if line.startswith("FROM "))
    image, _, tag = first.removeprefix("FROM ").partition(":")
    assert image == "langchain/langgraph-api" and tag.split("-")[0] == version, first


def test_the_image_installs_this_package_and_serves_every_graph(dockerfile):
    assert CONFIG["dependencies"] == ["."]  # the package itself, with pyproject's dependencies
    assert f"ADD . /deps/{ROOT.name}" in dockerfile
    line = next(x for x in dockerfile.splitlines() if x.startswith("ENV LANGSERVE_GRAPHS="))
    graphs = json.loads(line.removeprefix("ENV LANGSERVE_GRAPHS=").strip("'"))
    assert graphs.keys() == CONFIG["graphs"].keys()
    for spec in graphs.values():
        path, _, attr = spec.partition(":")
        source = ROOT / Path(path).relative_to(f"/deps/{ROOT.name}")
        assert source.is_file() and f"\n{attr} = " in source.read_text(), spec


def build_context_ignores(relative: str) -> bool:
    """Whether the image's build context leaves ``relative`` out (per .dockerignore).

    Docker anchors patterns at the context's root; the file writes every pattern as
    ``**/name`` (any depth) or ``/name`` (the root's), which gitignore matching reads the same way.
    """
    return IGNORED.match_file(relative)


@pytest.mark.parametrize("relative", SECRET_OR_LOCAL)
def test_secrets_and_local_state_stay_out_of_the_image(relative):
    assert build_context_ignores(relative)


def test_the_build_context_has_what_installing_the_package_reads():
    needed = ["pyproject.toml", "langgraph.json", PYPROJECT["readme"], *PYPROJECT["license-files"]]
    needed += [str(p.relative_to(ROOT)) for p in (ROOT / "src" / "planexec").rglob("*.py")]
    needed += [str(p.relative_to(ROOT)) for p in (ROOT / "src" / "planexec" / "demo").iterdir()]
    assert [path for path in needed if build_context_ignores(path)] == []
