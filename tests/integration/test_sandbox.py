"""The operator owns the sandbox: clients name a folder below the operator's root, nothing more."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from planexec import build_graph, default_registry
from planexec.tools.sandbox import Sandbox, SandboxError
from tests.helpers import plan_of, plan_reply, scripted, step

READ_HOSTNAME = plan_of(step(1, "read_file", {"path": "hostname"}))

CLIENT_PATHS = [
    "/",
    "/etc",
    "",
    "   ",
    "..",
    "../..",
    "a/../..",
    "ws/../../etc",
    "./ws",
    "~",
    "~root",
    "C:\\Windows",
    "a\\..\\..",
    ".planexec",
    "threads/../..",
    "-rf",
    "a//b",
    "a/",
    "a\x00b",
    "x" * 300,
]


@pytest.fixture(autouse=True)
def _operator_runs_without_approvals(monkeypatch):
    """These tests are about folders, not approvals: the operator's policy is "never"."""
    monkeypatch.setenv("PLANEXEC_APPROVAL", "never")


def config_of(thread_id: object) -> dict:
    return {"configurable": {"thread_id": thread_id}}


@pytest.mark.parametrize("name", CLIENT_PATHS)
def test_a_client_cannot_choose_a_folder_outside_the_root(use_models, ctx, name, workspace_root):
    model = scripted(plan_reply(READ_HOSTNAME))
    use_models(planner=model)
    graph = build_graph(checkpointer=InMemorySaver(), tools=default_registry())
    config = config_of(str(uuid.uuid4()))
    with pytest.raises(ValueError, match="shared_folder"):
        graph.invoke(
            {"task": "read the hostname"}, config, context=ctx(shared_folder=name, approval="never")
        )
    assert model.prompts == []  # refused before the planner saw (or listed) anything
    assert not graph.get_state(config).values.get("steps")


@pytest.mark.parametrize("name", [["a"], 5, {"path": "/"}])
def test_a_workspace_name_must_be_text(use_models, ctx, name):
    use_models(planner=scripted(plan_reply(READ_HOSTNAME)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=default_registry())
    with pytest.raises(ValueError, match="shared_folder.*(must be text|valid string)"):
        graph.invoke({"task": "t"}, config_of("t1"), context=ctx(shared_folder=name))


@pytest.mark.parametrize("thread_id", ["/", "..", ".", "a/b", "../x", "", " ", ".hidden", "a\\b"])
def test_thread_ids_that_are_paths_never_name_a_folder(use_models, ctx, thread_id, workspace_root):
    model = scripted(plan_reply(READ_HOSTNAME))
    use_models(planner=model)
    graph = build_graph(checkpointer=InMemorySaver(), tools=default_registry())
    with pytest.raises(ValueError, match="thread id"):
        graph.invoke(
            {"task": "t"}, config_of(thread_id), context=ctx(shared_folder=None, approval="never")
        )
    assert model.prompts == []
    assert not (workspace_root / "threads").exists() or not any(
        (workspace_root / "threads").iterdir()
    )


def test_a_run_without_thread_or_name_is_refused(use_models, ctx):
    use_models(planner=scripted(plan_reply(READ_HOSTNAME)))
    graph = build_graph(tools=default_registry())
    with pytest.raises(ValueError, match="no thread id"):
        graph.invoke({"task": "t"}, context=ctx(shared_folder=None, approval="never"))


def test_each_thread_has_its_own_workspace_by_default(use_models, ctx, workspace_root):
    writes = {
        tid: plan_of(step(1, "write_file", {"path": "out.txt", "content": f"from {tid}"}))
        for tid in ("thread-a", "thread-b")
    }
    planner = scripted(
        *(plan_reply(p, match=f"task of {tid}") for tid, p in writes.items()),
        plan_reply(writes["thread-a"], match="task of thread-c"),
    )
    use_models(planner=planner)
    graph = build_graph(checkpointer=InMemorySaver(), tools=default_registry())
    context = ctx(shared_folder=None, approval="never")

    async def both() -> list[dict]:
        return await asyncio.gather(
            *(
                graph.ainvoke({"task": f"task of {tid}"}, config_of(tid), context=context)
                for tid in writes
            )
        )

    for out in asyncio.run(both()):
        assert out["final"]["status"] == "succeeded"
    for tid in writes:
        assert (workspace_root / "threads" / tid / "out.txt").read_text() == f"from {tid}"
    # a later run of thread-a plans over its own files only
    graph.invoke({"task": "task of thread-a"}, config_of("thread-a"), context=context)
    assert "out.txt" in planner.prompts[-1]
    graph.invoke({"task": "task of thread-c"}, config_of("thread-c"), context=context)
    assert "out.txt" not in planner.prompts[-1] and "(empty)" in planner.prompts[-1]


def test_a_named_workspace_is_shared_below_the_root(use_models, ctx, workspace_root, tmp_path):
    plan = plan_of(step(1, "write_file", {"path": "note.txt", "content": "shared"}))
    use_models(planner=scripted(plan_reply(plan), plan_reply(plan)))
    chosen = tmp_path / "operator-root"
    graph = build_graph(
        checkpointer=InMemorySaver(), tools=default_registry(), workspace_root=chosen
    )
    out = graph.invoke(
        {"task": "t"}, config_of("t1"), context=ctx(shared_folder="team/sales", approval="never")
    )
    assert out["final"]["status"] == "succeeded"
    assert (chosen / "shared" / "team" / "sales" / "note.txt").read_text() == "shared"
    assert not (workspace_root / "shared" / "team").exists()  # the argument wins over the env


def test_a_link_out_of_the_root_is_refused(use_models, ctx, workspace_root, tmp_path):
    (workspace_root / "shared").mkdir(parents=True, exist_ok=True)
    (workspace_root / "shared" / "out").symlink_to(tmp_path)
    use_models(planner=scripted(plan_reply(READ_HOSTNAME)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=default_registry())
    with pytest.raises(ValueError, match="leads outside"):
        graph.invoke({"task": "t"}, config_of("t1"), context=ctx(shared_folder="out"))


def test_the_operator_chooses_the_root(monkeypatch, tmp_path):
    monkeypatch.setenv("PLANEXEC_WORKSPACE_ROOT", str(tmp_path / "env-root"))
    assert Sandbox.at().root == tmp_path / "env-root"
    assert Sandbox.at(tmp_path / "arg").workspace_path(None, "t1") == tmp_path / "arg/threads/t1"
    monkeypatch.delenv("PLANEXEC_WORKSPACE_ROOT")
    monkeypatch.chdir(tmp_path)
    assert Sandbox.at().root == tmp_path / "planexec-workspaces"
    with pytest.raises(SandboxError, match="empty"):
        Sandbox.at("")
    with pytest.raises(SandboxError, match="not both"):
        build_graph(workspace_root=tmp_path, sandbox=Sandbox.at(tmp_path))


def test_a_one_folder_sandbox_keeps_outputs_outside_and_refuses_names(tmp_path):
    box = Sandbox.one_folder(tmp_path / "mine", outputs=tmp_path / "spills")
    assert box.workspace_path(None, "any/thing") == tmp_path / "mine"
    with pytest.raises(SandboxError, match="not accepted"):
        box.workspace_path("other", "t1")
    for folder, outputs in ((tmp_path, tmp_path / "spills"), (tmp_path / "a", tmp_path)):
        with pytest.raises(SandboxError, match="overlap"):
            Sandbox.one_folder(folder, outputs=outputs)
