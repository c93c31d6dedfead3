"""Fixtures: scripted models patched into planexec, a workspace with the example data."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Hypothesis: "ci" (the default, and what .ci/run uses) is derandomized with no example
# database, so every run tries the same examples; `make fuzz` picks "fuzz": random, and
# tests.strategies.examples() multiplies every test's example count by FUZZ_SCALE.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("fuzz", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
os.environ.pop("LANGSMITH_TRACING", None)
os.environ.pop("LANGCHAIN_TRACING_V2", None)

from planexec.context import Context  # noqa: E402
from planexec.llm import models  # noqa: E402
from planexec.llm.scripted import ScriptedChatModel  # noqa: E402
from planexec.tools.sandbox import Sandbox  # noqa: E402
from tests.helpers import DEMO  # noqa: E402

WORKSPACE_NAME = "ws"


@pytest.fixture(scope="session", autouse=True)
def _scripted_models_allowed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Scripted model files may be read from this session's temp folders (and servers it starts)."""
    os.environ["PLANEXEC_SCRIPTED_DIR"] = str(tmp_path_factory.getbasetemp())
    yield
    os.environ.pop("PLANEXEC_SCRIPTED_DIR", None)


@pytest.fixture(autouse=True)
def workspace_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The operator's workspace root (and one-folder outputs) of every test: its own temp dir."""
    root = tmp_path / "workspaces"
    monkeypatch.setenv("PLANEXEC_WORKSPACE_ROOT", str(root))
    monkeypatch.setenv("PLANEXEC_OUTPUTS_DIR", str(tmp_path / "outputs"))
    return root


@pytest.fixture
def workspace(workspace_root: Path) -> Path:
    """The shared folder named ``ws`` (what ``ctx()`` names), with sales.csv."""
    root = Sandbox.at(workspace_root).workspace_path(WORKSPACE_NAME, None)
    root.mkdir(parents=True)
    shutil.copy(DEMO / "sales.csv", root / "sales.csv")
    return root


@pytest.fixture
def use_models(monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, ScriptedChatModel]]:
    """Make model names resolve to given scripted models: use_models(planner=..., executor=...)."""

    def install(**by_role: ScriptedChatModel) -> dict[str, ScriptedChatModel]:
        def load(spec: str, *_: Any) -> Any:
            role = spec.removeprefix("test:")
            if role not in by_role:
                raise AssertionError(f"no scripted model for {spec!r}")
            return by_role[role]

        monkeypatch.setattr(models, "provider_model", load)
        return by_role

    return install


@pytest.fixture
def ctx(workspace: Path) -> Callable[..., Context]:
    """Build a Context using the scripted test models and the test shared folder (by its name)."""

    def make(**overrides: Any) -> Context:
        base: dict[str, Any] = dict(
            planner_model="test:planner",
            executor_model="test:executor",
            evaluator_model="test:evaluator",
            shared_folder=WORKSPACE_NAME,
            retry_initial_interval=0.01,
        )
        base.update(overrides)
        return Context(**base)

    return make


@pytest.fixture
def hostile(
    use_models: Any, ctx: Callable[..., Context], monkeypatch: pytest.MonkeyPatch
) -> Context:
    """Two secrets in the environment, models that repeat them, a hostile run's context."""
    from tests import leaky

    for name, value in leaky.ENV.items():
        monkeypatch.setenv(name, value)
    use_models(planner=leaky.planner(), executor=leaky.executor(), evaluator=leaky.judge())
    return ctx(llm_judge=True, max_replans=0, inline_output_limit=1024, step_max_attempts=2)


@pytest.fixture(autouse=True)
def _no_api_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server for the session (skips with the reason if it cannot start)."""
    from tests.servers import postgres

    try:
        manager = postgres()
        url = manager.__enter__()
    except (FileNotFoundError, subprocess.CalledProcessError, KeyError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        pytest.skip(f"PostgreSQL is not available here: {exc} {detail.decode(errors='replace')}")
    try:
        yield url
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture
def restartable_postgres() -> Iterator[Any]:
    """A PostgreSQL server of this test alone, which the test may stop and start again."""
    from tests.servers import PostgresServer

    server = None
    try:
        server = PostgresServer()
        server.start()
    except (FileNotFoundError, subprocess.CalledProcessError, KeyError) as exc:
        if server is not None:
            server.remove()
        detail = getattr(exc, "stderr", b"") or b""
        pytest.skip(f"PostgreSQL is not available here: {exc} {detail.decode(errors='replace')}")
    try:
        yield server
    finally:
        server.remove()
