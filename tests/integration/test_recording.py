"""Record and replay at the step boundary: ``build_graph(recording=...)`` and ``run --record``.

A recorded run's tool outputs (Python, built-in and MCP tools) and, when asked, its model
replies are kept as plain JSON files; a replay serves them without calling a tool (counted
here: a tool that counts its calls, a built-in file tool whose file is not written, an MCP
stdio server whose state and process id show it was not called) and gives identical step
outputs. A call with no recording fails its step, naming the argument that changed.
"""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner
from typing_extensions import TypedDict

from planexec import Recording, build_graph
from planexec.cli import app
from planexec.llm.scripted import ScriptedChatModel, ScriptedReply
from planexec.nodes.finalizer import NOT_WRITTEN, REPLAYED
from planexec.tools import ToolRegistry, default_registry
from tests import leaky
from tests.helpers import (
    DEMO,
    calls,
    count,
    echo,
    plan_of,
    plan_reply,
    run_plan,
    step,
    text_reply,
    thread,
)


@tool
def counted(key: str, value: int) -> dict[str, Any]:
    """Count a call under ``key``; return the value and how many calls ``key`` has had."""
    return {"value": value, "calls": count(key)}


counted.metadata = {"side_effects": False}


def tools() -> ToolRegistry:
    registry = default_registry()
    registry.register(counted)
    return registry


def the_plan(key: str, path: str = "sales.csv") -> dict[str, Any]:
    """Two parallel branches: a counted tool feeding a file write, a CSV load; a model step."""
    return plan_of(
        step(1, "counted", {"key": key, "value": 7}),
        step(2, "write_file", {"path": "out/note.txt", "content": "value $1.value"}, [1]),
        step(3, "load_csv", {"path": path}),
        {**step(4, None, {"note": "$1.value"}, [1]), "tools": ["counted"]},
    )


def executor_model(key: str) -> ScriptedChatModel:
    """An executor model that calls the counted tool once, then answers."""
    return ScriptedChatModel(
        replies=[
            ScriptedReply(tool_calls=[{"name": "counted", "args": {"key": key, "value": 1}}]),
            text_reply("the executor is done"),
        ]
    )


def silent() -> ScriptedChatModel:
    """A model with nothing to say: any call to it fails."""
    return ScriptedChatModel(replies=[])


def outputs(values: dict[str, Any]) -> dict[str, Any]:
    return {k: (v["status"], v.get("output"), v.get("error")) for k, v in values["steps"].items()}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_replay_calls_no_tool_and_gives_the_recorded_outputs(
    mode, tmp_path, workspace, use_models, ctx
):
    key = f"replay-{mode}"
    folder = tmp_path / "recorded"
    use_models(planner=ScriptedChatModel(replies=[plan_reply(the_plan(key))]),
               executor=executor_model(key))  # fmt: skip
    recording = Recording(folder, "record")
    graph = build_graph(InMemorySaver(), tools=tools(), recording=recording)
    recorded = run_plan(graph, ctx(max_replans=0), mode)
    assert {s for s, *_ in outputs(recorded).values()} == {"succeeded"}, outputs(recorded)
    assert calls[key] == 2  # step 1 and the executor model's call
    assert (workspace / "out" / "note.txt").read_text() == "value 7"
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.json"))
    assert any(f.startswith("steps/counted/") for f in files), files
    assert any(f.startswith("steps/write_file/") for f in files), files
    assert any(f.startswith("models/planner/") for f in files), files
    assert any(f.startswith("models/executor/") for f in files), files

    # replay: no tool call (the count stays, the file is not written again), no model call
    # (the same scripts, so the same models: a changed script would miss the recording)
    (workspace / "out" / "note.txt").unlink()
    planner, executor = ScriptedChatModel(replies=[plan_reply(the_plan(key))]), executor_model(key)
    use_models(planner=planner, executor=executor)
    graph = build_graph(InMemorySaver(), tools=tools(), recording=Recording(folder, "replay"))
    replayed = run_plan(graph, ctx(max_replans=0), mode)
    assert not planner.prompts and not executor.prompts  # neither was asked
    assert outputs(replayed) == outputs(recorded)
    assert calls[key] == 2
    assert not (workspace / "out" / "note.txt").exists()  # a replayed tool writes nothing


def test_models_are_called_live_in_a_replay_unless_recorded(tmp_path, workspace, use_models, ctx):
    key = "models-live"
    folder = tmp_path / "tools-only"
    use_models(planner=ScriptedChatModel(replies=[plan_reply(the_plan(key))]),
               executor=executor_model(key))  # fmt: skip
    graph = build_graph(
        InMemorySaver(), tools=tools(), recording=Recording(folder, "record", models=False)
    )
    recorded = run_plan(graph, ctx(max_replans=0), "sync")
    assert not (folder / "models").exists()
    planner = ScriptedChatModel(replies=[plan_reply(the_plan(key))])
    use_models(planner=planner, executor=executor_model(key))
    graph = build_graph(InMemorySaver(), tools=tools(), recording=Recording(folder, "replay"))
    replayed = run_plan(graph, ctx(max_replans=0), "async")
    assert planner.prompts  # the planner was asked: its replies were not recorded
    assert outputs(replayed) == outputs(recorded)
    assert calls[key] == 2


def test_a_call_without_a_recording_fails_its_step_naming_what_changed(
    tmp_path, workspace, use_models, ctx
):
    key = "changed"
    folder = tmp_path / "recorded"
    use_models(planner=ScriptedChatModel(replies=[plan_reply(the_plan(key))]),
               executor=executor_model(key))  # fmt: skip
    graph = build_graph(InMemorySaver(), tools=tools(), recording=Recording(folder, "record"))
    run_plan(graph, ctx(max_replans=0), "sync")
    shutil.copy(workspace / "sales.csv", workspace / "other.csv")
    changed = plan_of(
        step(1, "load_csv", {"path": "other.csv"}),
        step(2, "list_files", {}),
        step(3, "counted", {"key": key, "value": 7}),
    )
    use_models(planner=ScriptedChatModel(replies=[plan_reply(changed)]), executor=silent())
    graph = build_graph(
        InMemorySaver(), tools=tools(), recording=Recording(folder, "replay", models=False)
    )
    values = run_plan(graph, ctx(max_replans=0, step_max_attempts=3), "async")
    steps = values["steps"]
    assert steps["1"]["status"] == "failed"
    assert steps["1"]["error"] == (
        "no recording of load_csv with these arguments; nearest recording differs in path: "
        "recorded 'sales.csv', now 'other.csv'"
    )
    assert steps["1"]["attempts"] == 1  # not transient: not attempted again
    assert steps["2"]["error"] == "no recording of tool list_files"
    assert steps["3"]["status"] == "succeeded"  # the same call as recorded
    assert steps["3"]["replayed"] is True and "replayed" not in steps["1"]  # 1: nothing served
    assert calls[key] == 2


def test_an_mcp_stdio_tool_is_replayed_without_a_call(tmp_path, workspace, use_models, ctx):
    from planexec.tools.mcp import McpServers, load_mcp_config
    from tests.mcp_servers.running import stdio_entry

    config = {"mcpServers": {"notes": stdio_entry("notes", tag="recording")}}
    plan = plan_of(
        step(1, "notes__pid", {}),
        step(2, "notes__delete_note", {"title": "groceries"}),
        step(3, "notes__read_note", {"title": "todo"}),
    )
    folder = tmp_path / "mcp"
    with McpServers(load_mcp_config(config)) as servers:
        use_models(planner=ScriptedChatModel(replies=[plan_reply(plan)]))
        graph = build_graph(
            InMemorySaver(),
            tools=servers.registry(ToolRegistry()),
            recording=Recording(folder, "record"),
        )
        recorded = run_plan(graph, ctx(max_replans=0, approval="always"), "sync")
    assert {s for s, *_ in outputs(recorded).values()} == {"succeeded"}, outputs(recorded)

    with McpServers(load_mcp_config(config)) as servers:  # a new server process
        registry = servers.registry(ToolRegistry())
        planner = ScriptedChatModel(replies=[plan_reply(plan)])  # the same script: replayed
        use_models(planner=planner)
        graph = build_graph(InMemorySaver(), tools=registry, recording=Recording(folder, "replay"))
        replayed = run_plan(graph, ctx(max_replans=0, approval="always"), "async")
        assert outputs(replayed) == outputs(recorded)
        assert not planner.prompts
        live_pid = registry.get("notes__pid").invoke({})
        assert replayed["steps"]["1"]["output"] != live_pid  # the recorded process's id
        # the note the recorded run deleted is still there: delete_note was not called
        assert registry.get("notes__read_note").invoke({"title": "groceries"})
        assert servers.server("notes").opened == 1


def test_no_secret_is_written_to_a_recording_and_failures_replay(
    tmp_path, hostile, workspace, use_models
):
    folder = tmp_path / "hostile"
    graph = build_graph(
        InMemorySaver(), tools=leaky.registry(), recording=Recording(folder, "record")
    )
    recorded = run_plan(graph, hostile, "sync")
    assert recorded["steps"]["1"]["status"] == "succeeded"
    assert list(folder.rglob("*.json"))
    assert leaky.leaking_files([folder]) == []
    assert not [p for p in folder.rglob("*") if p.name.startswith(".")]  # no temporary left

    # the run wrote files into the workspace: the planner's prompt lists them, so it is asked
    use_models(planner=leaky.planner(), executor=leaky.executor(), evaluator=leaky.judge())
    replayed = run_plan(
        build_graph(InMemorySaver(), tools=leaky.registry(), recording=Recording(folder, "replay")),
        hostile,
        "async",
    )
    assert outputs(replayed) == outputs(recorded)  # failures, recorded, fail the same way
    assert leaky.leaking_files([folder]) == []


def test_a_provider_models_replies_replay_without_its_server(monkeypatch, tmp_path, workspace):
    """langchain-openai against a local server: a streamed plan, bound tools, structured
    verdicts; replayed with the server gone, every reply comes from the recording."""
    from tests.integration.test_openai_compatible import answer, local_models
    from tests.openai_server import serve

    monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
    ctx = local_models()
    folder = tmp_path / "openai"
    registry = ToolRegistry([echo])
    with serve(answer) as (url, requests):
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        graph = build_graph(InMemorySaver(), tools=registry, recording=Recording(folder, "record"))
        recorded = run_plan(graph, ctx, "sync")
        asked = len(requests)
    assert asked >= 4 and recorded["final"]["status"] == "partial"  # the judge fails step 3
    assert leaky_free(folder, "local-key-not-secret")
    replaying = Recording(folder, "replay")
    graph = build_graph(InMemorySaver(), tools=registry, recording=replaying)
    replayed = run_plan(graph, ctx, "async")  # the server is gone: any model call would fail
    assert outputs(replayed) == outputs(recorded)
    assert replayed["final"] == recorded["final"]
    assert replaying.stats["model_replies_replayed"] == asked
    assert replaying.stats["model_calls_live"] == 0


def leaky_free(folder, secret: str) -> bool:
    return all(secret.encode() not in p.read_bytes() for p in folder.rglob("*.json"))


def test_recording_is_an_operator_choice_not_a_context_field():
    from planexec.context import Context

    assert "recording" not in {f for f in Context.__dataclass_fields__}
    with pytest.raises(TypeError):
        build_graph(InMemorySaver(), recording="some/folder")  # type: ignore[arg-type]


# --- the command line ---------------------------------------------------------------------

runner = CliRunner()

TOOLS_MODULE = '''
from langchain_core.tools import tool
from tests.helpers import count

@tool
def counted(key: str, value: int) -> dict:
    """Count a call under key."""
    return {"value": value, "calls": count(key)}

counted.metadata = {"side_effects": False}
TOOLS = [counted]
'''


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_DB", str(tmp_path / "runs.sqlite"))
    (tmp_path / "my_tools.py").write_text(TOOLS_MODULE)
    return tmp_path


def cli(*args: str):
    return runner.invoke(app, list(args))


def thread_of(output: str) -> str:
    return re.search(r"thread ([0-9a-f-]{36})", output).group(1)


def shown_steps(tid: str) -> dict[str, Any]:
    shown = json.loads(cli("show", tid, "--json").output)
    return {k: (v["status"], v.get("output"), v.get("error")) for k, v in shown["steps"].items()}


def test_run_record_then_replay_from_the_command_line(cli_env):
    key = "cli-replay"
    plan = json.loads((DEMO / "sales_plan.json").read_text())
    plan["steps"].append({"counted": {"key": key, "value": 3}})
    (cli_env / "plan.json").write_text(json.dumps(plan))
    common = ["--plan", "plan.json", "--yes", "--data", str(DEMO / "sales.csv")]
    common += ["--tools", "my_tools.py:TOOLS"]
    first = cli("run", *common, "--workspace", "one", "--record", "rec")
    assert first.exit_code == 0, first.output
    assert calls[key] == 1
    assert (cli_env / "one" / "output" / "report.md").exists()
    assert list((cli_env / "rec" / "steps").glob("*/*.json"))

    second = cli("run", *common, "--workspace", "two", "--replay", "rec")
    assert second.exit_code == 0, second.output
    assert calls[key] == 1  # no call
    assert "replayed from" in second.output and "7 tool calls (0 not recorded)" in second.output
    assert not (cli_env / "two" / "output" / "report.md").exists()  # not written again
    assert shown_steps(thread_of(second.output)) == shown_steps(thread_of(first.output))

    changed = json.loads(json.dumps(plan))
    changed["steps"][-1] = {"counted": {"key": key, "value": 4}}
    (cli_env / "changed.json").write_text(json.dumps(changed))
    changed_run = ["--plan", "changed.json", "--yes", "--data", str(DEMO / "sales.csv")]
    changed_run += ["--tools", "my_tools.py:TOOLS", "--workspace", "three", "--replay", "rec"]
    third = cli("run", *changed_run)
    assert third.exit_code != 0
    assert "nearest recording differs in value: recorded 3, now 4" in third.output
    assert calls[key] == 1


def test_record_and_replay_are_refused_together_and_explained(cli_env):
    both = cli("run", "t", "--record", "a", "--replay", "b")
    assert both.exit_code != 0
    assert "--record" in both.output and "--replay" in both.output
    missing = cli("run", "--plan", "x.json", "--replay", "no-such-folder")
    assert missing.exit_code != 0
    assert "no-such-folder" in missing.output
    helped = cli("run", "--help").output
    assert "--record" in helped and "--replay" in helped
    resumed = cli("resume", "--help").output
    assert "--record" in resumed and "--replay" in resumed and "given again" in resumed


# --- a replayed output is checked and marked like a live one (issue 36, R2) ----------------


class Total(TypedDict):
    total: int


def add(a: int, b: int) -> Total:
    """Add two numbers."""
    return {"total": a + b}


def scripted_planner(*steps: dict[str, Any]) -> ScriptedChatModel:
    """A planner whose script plans ``steps`` (shorthand steps: ``{tool: args}``)."""
    reply = ScriptedReply(
        tool_calls=[{"name": "Plan", "args": {"goal": "g", "steps": list(steps)}}]
    )
    return ScriptedChatModel(replies=[reply] * 3)


def go(
    tmp_path: Any,
    tools_: list[Any],
    steps: list[dict[str, Any]],
    recording: Recording | None,
    *,
    workspace: str = "ws",
    config: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Any]:
    """Run a plan of ``steps`` to its end (no approval) with ``recording``; return its values."""
    graph = build_graph(
        InMemorySaver(),
        workspace=str(tmp_path / workspace),
        tools=tools_,
        models={"planner": scripted_planner(*steps)},
        approval="never",
        recording=recording,
    )
    return graph.invoke({"task": "t"}, {**thread(), **(config or {})}), graph


def edit_output(folder: Any, tool_name: str, output: Any) -> None:
    """Edit the recorded output of the one call of ``tool_name`` by hand."""
    (file,) = (folder / "steps" / tool_name).glob("*.json")
    data = json.loads(file.read_text())
    file.write_text(json.dumps({**data, "output": output}))


def test_a_replayed_output_must_fit_the_tools_output_schema(tmp_path):
    folder = tmp_path / "rec"
    values, _ = go(tmp_path, [add], [{"add": {"a": 1, "b": 2}}], Recording(folder, "record"))
    assert values["final"]["status"] == "succeeded"
    edit_output(folder, "add", {"total": "DROP TABLE"})
    values, _ = go(tmp_path, [add], [{"add": {"a": 1, "b": 2}}], Recording(folder, "replay"))
    step1 = values["steps"]["1"]
    assert step1["status"] == "failed" and "total" in step1["error"], step1
    assert "DROP TABLE" not in json.dumps(values["final"])


def test_a_replayed_output_is_scrubbed_of_this_runs_secrets(tmp_path, monkeypatch):
    secret = "sk-live-REPLAYED-secret-424242"

    def lookup(name: str) -> str:
        """Look a name up."""
        return f"config for {name}: token={secret}"

    folder = tmp_path / "rec"
    go(tmp_path, [lookup], [{"lookup": {"name": "svc"}}], Recording(folder, "record"))
    monkeypatch.setenv("SERVICE_API_KEY", secret)  # a secret of this run, not of the recorded
    values, _ = go(tmp_path, [lookup], [{"lookup": {"name": "svc"}}], Recording(folder, "replay"))
    assert values["steps"]["1"]["status"] == "succeeded"
    assert secret not in json.dumps(values, default=str)
    assert "token=[redacted]" in values["final"]["answer"]


def double(x: int) -> int:
    """Double x."""
    return 2 * x


def test_a_changed_script_misses_the_recorded_model_replies(tmp_path):
    folder = tmp_path / "rec"
    go(tmp_path, [double], [{"double": {"x": 3}}], Recording(folder, "record"))
    values, graph = go(
        tmp_path, [double], [{"double": {"x": 5}}], Recording(folder, "replay", models=True)
    )
    assert [s["args"] for s in values["plan"]["steps"]] == [{"x": 5}]  # the new script's plan


def test_a_models_settings_and_endpoint_are_part_of_its_identity(monkeypatch):
    from langchain_openai import ChatOpenAI

    from planexec.llm.calls import model_identity

    monkeypatch.setenv("OPENAI_API_KEY", "sk-identity-test-0000000000")

    def identity(**settings: Any) -> dict[str, Any]:
        return model_identity(ChatOpenAI(model="gpt-4.1", temperature=0, **settings), None)

    base = identity()
    for settings in (
        {"base_url": "http://127.0.0.1:9/v1"},
        {"top_p": 0.1},
        {"reasoning_effort": "high"},
        {"seed": 7},
        {"extra_body": {"top_k": 1}},
    ):
        assert identity(**settings) != base, settings
    assert "sk-identity-test" not in json.dumps(base)
    one, two = (
        model_identity(ScriptedChatModel(replies=[text_reply(t)]), None) for t in ("a", "b")
    )
    assert one != two


def write_note(path: str, content: str) -> dict[str, Any]:
    """Write a note (a side effect) and return where."""
    from planexec.tools import current_workspace

    current_workspace().resolve(path).parent.mkdir(parents=True, exist_ok=True)
    current_workspace().resolve(path).write_text(content)
    return {"path": path, "bytes": len(content)}


def note_tool() -> Any:
    from langchain_core.tools import StructuredTool

    made = StructuredTool.from_function(write_note)
    made.metadata = {"side_effects": True, "file_fields": ["path"]}
    return made


def test_a_replayed_step_is_marked_and_its_files_are_not_claimed(tmp_path):
    folder = tmp_path / "rec"
    plan = [{"write_note": {"path": "out/r.md", "content": "numbers"}}]
    recorded, _ = go(tmp_path, [note_tool()], plan, Recording(folder, "record"), workspace="one")
    assert recorded["final"]["artifacts"] == ["out/r.md"]
    assert "replayed" not in recorded["steps"]["1"]

    seen: list[dict[str, Any]] = []

    class Watcher(BaseCallbackHandler):
        def on_tool_start(self, serialized, input_str, *, metadata=None, **kwargs):
            seen.append(dict(metadata or {}))

    replayed, _ = go(
        tmp_path,
        [note_tool()],
        plan,
        Recording(folder, "replay"),
        workspace="two",
        config={"callbacks": [Watcher()]},
    )
    assert not (tmp_path / "two" / "out" / "r.md").exists()
    assert replayed["steps"]["1"]["replayed"] is True
    final = replayed["final"]
    assert final["artifacts"] == []  # files this run did not write are not its artifacts
    assert "out/r.md" in final["answer"] and NOT_WRITTEN in final["answer"]
    assert any(m.get("planexec_replayed") is True for m in seen), seen


def send_mail(to: str) -> dict[str, Any]:
    """Send a mail (a side effect that names no file)."""
    return {"sent": True, "to": to}


def mail_tool() -> Any:
    from langchain_core.tools import StructuredTool

    made = StructuredTool.from_function(send_mail)
    made.metadata = {"side_effects": True}
    return made


@pytest.mark.parametrize("steps", [1, 2])
def test_the_answer_says_which_results_were_replayed_not_done(tmp_path, steps):
    folder = tmp_path / "rec"
    plan = [{"send_mail": {"to": "a@example.com"}}]
    if steps == 2:
        plan.append({"send_mail": {"to": "b@example.com"}})
    live, _ = go(tmp_path, [mail_tool()], plan, Recording(folder, "record"), workspace="one")
    assert REPLAYED not in live["final"]["answer"]
    replayed, _ = go(tmp_path, [mail_tool()], plan, Recording(folder, "replay"), workspace="two")
    answer = replayed["final"]["answer"]
    assert answer.count(REPLAYED) == steps, answer  # each replayed result says so


def test_a_replayed_file_path_must_lie_in_the_workspace(tmp_path):
    folder = tmp_path / "rec"
    plan = [{"write_note": {"path": "out/r.md", "content": "numbers"}}]
    go(tmp_path, [note_tool()], plan, Recording(folder, "record"), workspace="one")
    edit_output(folder, "write_note", {"path": "../../../../../etc/passwd", "bytes": 1})
    values, _ = go(tmp_path, [note_tool()], plan, Recording(folder, "replay"), workspace="two")
    assert values["final"]["status"] != "succeeded"
    assert "etc/passwd" not in json.dumps(values["final"]["artifacts"])


def private_lookup(q: str) -> str:
    """The inner graph's own tool."""
    return f"inner result for {q}"


def test_a_graph_without_a_recording_never_uses_its_callers(tmp_path):
    def delegate(q: str) -> str:
        """Run an inner graph, built without a recording."""
        values, _ = go(tmp_path, [private_lookup], [{"private_lookup": {"q": q}}], None)
        return str(values["final"]["answer"])

    folder = tmp_path / "rec"
    values, _ = go(tmp_path, [delegate], [{"delegate": {"q": "abc"}}], Recording(folder, "record"))
    assert values["final"]["status"] == "succeeded"
    assert not (folder / "steps" / "private_lookup").exists()
    assert (folder / "steps" / "delegate").exists()


def test_show_says_a_step_was_replayed(cli_env):
    plan = {"goal": "g", "steps": [{"counted": {"key": "shown-replayed", "value": 3}}]}
    (cli_env / "plan.json").write_text(json.dumps(plan))
    common = ["--plan", "plan.json", "--yes", "--tools", "my_tools.py:TOOLS"]
    assert cli("run", *common, "--workspace", "one", "--record", "rec").exit_code == 0
    second = cli("run", *common, "--workspace", "two", "--replay", "rec")
    assert second.exit_code == 0, second.output
    shown = cli("show", thread_of(second.output))
    assert "succeeded (replayed)" in shown.output, shown.output
