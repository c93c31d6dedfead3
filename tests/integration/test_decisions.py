"""Every decision is a record: who (and who vouched for it), when, about which plan (issue 35)."""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack, ExitStack
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.admission import InvalidInputError
from planexec.tools import ToolRegistry
from tests.helpers import always_fails, echo, plan_of, plan_reply, scripted, step, thread

PLAN = plan_of(
    step(1, "echo", {"text": "secret-arg-1"}), step(2, "echo", {"text": "got ${1}"}, [1])
)
TOOLS = ToolRegistry([echo, always_fails])


def saver_of(kind: str, tmp_path, stack) -> Any:
    if kind == "memory":
        return InMemorySaver()
    from langgraph.checkpoint.sqlite import SqliteSaver

    return stack.enter_context(SqliteSaver.from_conn_string(str(tmp_path / "d.db")))


def caller(name: str, source: str = "python") -> dict[str, Any]:
    """A config with a fresh thread and the caller named as planexec's CLI names it."""
    config = thread()
    config["configurable"]["planexec_caller"] = {"id": name, "source": source}
    return config


def server_config(identity: str | None, permissions: list[str] | None = None) -> dict[str, Any]:
    """What langgraph_api puts in a run's configurable (see /work/coord/server-identity.md)."""
    user = None if identity is None else SimpleNamespace(identity=identity, is_authenticated=True)
    return {
        "langgraph_auth_user": user,
        "langgraph_auth_user_id": identity or "",
        "langgraph_auth_permissions": permissions or [],
    }


def iso(text: str) -> datetime:
    at = datetime.fromisoformat(text)
    assert at.utcoffset() is not None and at.utcoffset().total_seconds() == 0
    return at


def check_recorded(graph: Any, config: Any, first: Any, out: Any) -> None:
    request = first["__interrupt__"][0].value
    assert out["final"]["status"] == "succeeded"
    [decision] = out["decisions"]
    assert decision["action"] == "approve" and decision["kind"] == "plan"
    assert decision["by"] == {"id": "alice", "source": "python"}
    assert (decision["version"], decision["digest"]) == (1, request["digest"])
    assert iso(decision["at"]) >= iso(request["asked_at"])


ALICE_APPROVES = Command(resume={"action": "approve", "by": "alice"})


@pytest.mark.parametrize("saver", ["memory", "sqlite"])
def test_a_python_callers_by_is_recorded_with_the_plan_it_approved(
    use_models, ctx, tmp_path, saver
):
    use_models(planner=scripted(plan_reply(PLAN)))
    with ExitStack() as stack:
        graph = build_graph(checkpointer=saver_of(saver, tmp_path, stack), tools=TOOLS)
        config = thread()
        first = graph.invoke({"task": "t"}, config, context=ctx())
        out = graph.invoke(ALICE_APPROVES, config, context=ctx())
        check_recorded(graph, config, first, out)
        assert graph.get_state(config).values["decisions"] == out["decisions"]  # stable
        assert graph.get_state(config).values["started_by"] == {"id": None, "source": "unknown"}


@pytest.mark.parametrize("saver", ["memory", "sqlite"])
def test_the_same_on_async_runs(use_models, ctx, tmp_path, saver):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    use_models(planner=scripted(plan_reply(PLAN)))

    async def go() -> None:
        async with AsyncExitStack() as stack:
            checkpointer = (
                InMemorySaver()
                if saver == "memory"
                else await stack.enter_async_context(
                    AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db"))
                )
            )
            graph = build_graph(checkpointer=checkpointer, tools=TOOLS)
            config = thread()
            first = await graph.ainvoke({"task": "t"}, config, context=ctx())
            out = await graph.ainvoke(ALICE_APPROVES, config, context=ctx())
            check_recorded(graph, config, first, out)
            assert (await graph.aget_state(config)).values["decisions"] == out["decisions"]

    asyncio.run(go())


def test_the_same_on_postgres(use_models, ctx, postgres_url):
    from langgraph.checkpoint.postgres import PostgresSaver

    use_models(planner=scripted(plan_reply(PLAN)))
    with PostgresSaver.from_conn_string(postgres_url) as saver:
        saver.setup()
        graph = build_graph(checkpointer=saver, tools=TOOLS)
        config = thread()
        first = graph.invoke({"task": "t"}, config, context=ctx())
        out = graph.invoke(ALICE_APPROVES, config, context=ctx())
        check_recorded(graph, config, first, out)


def test_the_cli_caller_is_recorded_as_who_started_and_who_answered(use_models, ctx):
    use_models(planner=scripted(plan_reply(PLAN)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = caller("carol", "cli")
    graph.invoke({"task": "t"}, config, context=ctx())
    out = graph.invoke(
        Command(resume={"action": "approve", "by": "mallory"}), config, context=ctx()
    )
    assert out["decisions"][0]["by"] == {"id": "carol", "source": "cli"}  # caller beats "by"
    assert graph.get_state(config).values["started_by"] == {"id": "carol", "source": "cli"}


def test_a_policy_approval_is_recorded_as_the_policys(use_models, ctx):
    use_models(planner=scripted(plan_reply(PLAN)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS, approval="never")
    out = graph.invoke({"task": "t"}, thread(), context=ctx(approval="never"))
    [decision] = out["decisions"]
    assert decision["action"] == "approve"
    assert decision["by"] == {"id": "policy:never", "source": "policy"}
    assert decision["version"] == 1 and len(decision["digest"]) == 64
    iso(decision["at"])


def test_reject_edit_cancel_and_refusals_are_each_one_record(use_models, ctx):
    revised = plan_of(step(1, "echo", {"text": "second"}))
    use_models(planner=scripted(plan_reply(PLAN), plan_reply(revised)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ctx())
    out = graph.invoke(Command(resume={"action": "nonsense"}), config, context=ctx())
    out = graph.invoke(
        Command(resume={"action": "reject", "feedback": "shorter", "by": "bob"}),
        config,
        context=ctx(),
    )
    request = out["__interrupt__"][0].value
    assert [d["action"] for d in request["history"]] == ["refused", "reject"]
    edited = {"goal": "g", "steps": plan_of(step(1, "echo", {"text": "edited"}))["steps"]}
    out = graph.invoke(
        Command(resume={"action": "edit", "plan": edited, "by": "bob"}), config, context=ctx()
    )
    decisions = out["decisions"]
    assert [d["action"] for d in decisions] == ["refused", "reject", "edit"]
    assert "nonsense" in decisions[0]["feedback"] and decisions[0]["by"]["source"] == "unknown"
    assert decisions[1]["feedback"] == "shorter" and decisions[1]["version"] == 1
    assert decisions[2]["version"] == 2
    approved = graph.get_state(config).values["approved"]
    assert decisions[2]["edited"] == {"version": 3, "digest": approved["digest"]}
    ats = [iso(d["at"]) for d in decisions]
    assert ats == sorted(ats)
    config = thread()
    graph2 = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    use_models(planner=scripted(plan_reply(PLAN)))
    graph2.invoke({"task": "t"}, config, context=ctx())
    out = graph2.invoke(
        Command(resume={"action": "cancel", "reason": "not now", "by": "bob"}),
        config,
        context=ctx(),
    )
    assert out["final"]["status"] == "cancelled"
    assert [(d["action"], d.get("feedback")) for d in out["decisions"]] == [("cancel", "not now")]


def test_on_the_server_the_authenticated_user_is_recorded_and_by_is_ignored(use_models, ctx):
    use_models(planner=scripted(plan_reply(PLAN)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = thread()
    config["configurable"].update(server_config("owner"))
    config["configurable"]["planexec_caller"] = {"id": "root", "source": "cli"}  # a forgery
    graph.invoke({"task": "t"}, config, context=ctx())
    answering = {"configurable": {**config["configurable"], **server_config("approver")}}
    out = graph.invoke(
        Command(resume={"action": "approve", "by": "admin"}), answering, context=ctx()
    )
    assert out["decisions"][0]["by"] == {"id": "approver", "source": "server"}
    assert graph.get_state(config).values["started_by"] == {"id": "owner", "source": "server"}


STUDIO = SimpleNamespace(identity="langgraph-studio-user", is_authenticated=False)


@pytest.mark.parametrize("user", ["no auth", "studio bypass"])
def test_on_a_server_without_auth_the_identity_is_unknown(use_models, ctx, user):
    use_models(planner=scripted(plan_reply(PLAN)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = thread()
    config["configurable"].update(server_config(None))
    if user == "studio bypass":  # not authenticated: not believed
        config["configurable"]["langgraph_auth_user"] = STUDIO
        config["configurable"]["langgraph_auth_user_id"] = STUDIO.identity
    graph.invoke({"task": "t"}, config, context=ctx())
    out = graph.invoke(Command(resume={"action": "approve", "by": "admin"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"
    assert out["decisions"][0]["by"] == {"id": None, "source": "unknown"}


@pytest.mark.parametrize("key", ["decisions", "started_by"])
def test_no_state_edit_writes_a_decision_record(use_models, ctx, key):
    use_models(planner=scripted(plan_reply(PLAN)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ctx())
    forged: Any = (
        [{"action": "approve", "by": {"id": "admin", "source": "server"}}]
        if key == "decisions"
        else {"id": "admin", "source": "server"}
    )
    with pytest.raises(InvalidInputError, match=key):
        graph.update_state(config, {key: forged})
    with pytest.raises(InvalidInputError, match=key):
        graph.invoke(
            Command(resume={"action": "approve"}, update={key: forged}), config, context=ctx()
        )
    assert "decisions" not in graph.get_state(config).values or not graph.get_state(
        config
    ).values.get("decisions")


def test_a_fork_keeps_only_the_records_its_own_branch_made(use_models, ctx):
    use_models(planner=scripted(plan_reply(PLAN)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ctx())
    asked = graph.get_state(config)  # the checkpoint waiting at the approval
    graph.invoke(Command(resume={"action": "approve", "by": "alice"}), config, context=ctx())
    fork = graph.update_state(asked.config, {"feedback": None})  # a fork at the approval
    out = graph.invoke(Command(resume={"action": "cancel", "by": "bob"}), fork, context=ctx())
    if "__interrupt__" in out:  # the fork asks again (a fresh request): answer it
        out = graph.invoke(Command(resume={"action": "cancel", "by": "bob"}), fork, context=ctx())
    assert [(d["action"], d["by"]["id"]) for d in out["decisions"]] == [("cancel", "bob")]
    assert [d["action"] for d in graph.get_state(config).values["decisions"]] == ["cancel"]


@tool
def broken(text: str) -> str:
    """Always fail."""
    raise ValueError("no")


def test_an_answer_to_a_failed_step_is_a_record(use_models, ctx):
    plan = plan_of({**step(1, "always_fails", {"reason": "x"}), "on_failure": "ask"})
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ctx(retry_initial_interval=0.0))
    out = graph.invoke(Command(resume={"action": "approve", "by": "alice"}), config, context=ctx())
    request = out["__interrupt__"][0].value
    assert request["type"] == "step_failure" and request["asked_at"]
    out = graph.invoke(
        Command(resume={"action": "cancel", "step": 1, "reason": "enough", "by": "bob"}),
        config,
        context=ctx(),
    )
    last = out["decisions"][-1]
    assert last["kind"] == "step_failure" and last["step"] == 1
    assert (last["action"], last["by"], last["feedback"]) == (
        "cancel",
        {"id": "bob", "source": "python"},
        "enough",
    )
    assert last["version"] == 1


def test_the_hook_hears_waiting_and_answered_once_each_without_arguments(use_models, ctx):
    events: list[dict[str, Any]] = []
    use_models(planner=scripted(plan_reply(PLAN)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS, approval_hook=events.append)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ctx())
    graph.invoke(Command(resume={"action": "nonsense", "by": "x"}), config, context=ctx())
    assert [e["event"] for e in events] == ["waiting", "answered", "waiting"]
    out = graph.invoke(Command(resume={"action": "approve", "by": "alice"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"
    assert [(e["event"], e.get("action")) for e in events] == [
        ("waiting", None),
        ("answered", "refused"),
        ("waiting", None),
        ("answered", "approve"),
    ]
    assert events[-1]["by"] == {"id": "alice", "source": "python"}
    assert events[-1]["thread_id"] == config["configurable"]["thread_id"]
    assert events[0]["kind"] == "plan" and events[0]["version"] == 1
    assert "secret-arg" not in json.dumps(events)


def test_a_failing_hook_never_fails_the_run(use_models, ctx):
    def hook(event: Any) -> None:
        raise RuntimeError("the pager is down")

    use_models(planner=scripted(plan_reply(PLAN)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS, approval_hook=hook)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ctx())
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"


def test_a_url_hook_is_posted_the_event(use_models, ctx):
    import http.server
    import threading

    got: list[dict[str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        use_models(planner=scripted(plan_reply(PLAN)))
        url = f"http://127.0.0.1:{server.server_port}/hook"
        graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS, approval_hook=url)
        config = thread()
        graph.invoke({"task": "t"}, config, context=ctx())
        graph.invoke(Command(resume={"action": "approve", "by": "alice"}), config, context=ctx())
    finally:
        server.shutdown()
    assert [e["event"] for e in got] == ["waiting", "answered"]
    assert got[1]["by"] == {"id": "alice", "source": "python"}


def test_the_cli_user_is_the_os_account_not_logname(monkeypatch):
    import os
    import pwd

    from planexec.cli.caller import local_user

    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, "mallory")
    assert local_user() == {"id": pwd.getpwuid(os.getuid()).pw_name, "source": "cli"}


class _Hook:
    """A local HTTP hook whose handler is given; the URL carries a user, password and key."""

    def __init__(self, handle: Any) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        port = self.server.server_port
        self.url = f"http://hookuser:hookpass@127.0.0.1:{port}/hook?key=SECRETKEY123"

    def close(self) -> None:
        self.server.shutdown()


def test_the_hook_url_and_its_secrets_are_never_logged(use_models, ctx, caplog):
    import logging

    def ok(handler: Any) -> None:
        handler.rfile.read(int(handler.headers["Content-Length"]))
        handler.send_response(204)
        handler.end_headers()

    hook = _Hook(ok)
    caplog.set_level(logging.DEBUG)
    try:
        use_models(planner=scripted(plan_reply(PLAN)))
        graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS, approval_hook=hook.url)
        config = thread()
        graph.invoke({"task": "t"}, config, context=ctx())
        out = graph.invoke(ALICE_APPROVES, config, context=ctx())
    finally:
        hook.close()
    assert out["final"]["status"] == "succeeded"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "HTTP Request: POST http://127.0.0.1:" in logged  # still logged, secrets left out
    for secret in ("hookpass", "SECRETKEY123", "hookuser"):
        assert secret not in logged


def test_a_hook_that_drips_its_answer_holds_the_run_at_most_the_deadline(
    use_models, ctx, monkeypatch, caplog
):
    import time

    from planexec.review import notify

    monkeypatch.setattr(notify, "HOOK_TIMEOUT", 0.5)

    def drip(handler: Any) -> None:
        handler.rfile.read(int(handler.headers["Content-Length"]))
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        handler.wfile.flush()
        for _ in range(30):
            time.sleep(0.2)  # one byte at a time: each read is quick, the whole is not
            try:
                handler.wfile.write(b"x")
                handler.wfile.flush()
            except OSError:
                return

    hook = _Hook(drip)
    try:
        use_models(planner=scripted(plan_reply(PLAN)))
        graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS, approval_hook=hook.url)
        config = thread()
        began = time.monotonic()
        graph.invoke({"task": "t"}, config, context=ctx())
        took = time.monotonic() - began
    finally:
        hook.close()
    assert took < 3.0
    assert "the approval hook did not answer within 0.5 s" in caplog.text
    assert "SECRETKEY123" not in caplog.text


@pytest.mark.parametrize("kind", ["sleep", "exit"])
def test_a_callable_hook_that_sleeps_or_exits_never_holds_or_fails_the_run(
    use_models, ctx, monkeypatch, kind
):
    import time

    from planexec.review import notify

    monkeypatch.setattr(notify, "HOOK_TIMEOUT", 0.5)
    calls: list[str] = []

    def hook(event: Any) -> None:
        calls.append(event["event"])
        if kind == "sleep":
            time.sleep(5)
        raise SystemExit(3)

    use_models(planner=scripted(plan_reply(PLAN)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS, approval_hook=hook)
    config = thread()
    began = time.monotonic()
    graph.invoke({"task": "t"}, config, context=ctx())
    out = graph.invoke(ALICE_APPROVES, config, context=ctx())
    assert time.monotonic() - began < 3.0
    assert out["final"]["status"] == "succeeded"
    assert calls == ["waiting", "answered"]  # each once: a replay does not send again
