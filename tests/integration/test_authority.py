"""Who may answer, and until when: approvers, maker-checker and expiry (issue 35)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.errors import ConfigurationError
from planexec.review import authority
from planexec.tools import ToolRegistry
from tests.helpers import always_fails, echo, plan_of, plan_reply, scripted, step, thread
from tests.integration.test_decisions import server_config

SENT: list[str] = []


@tool
def send(text: str) -> str:
    """Send the text somewhere (declares nothing, so it counts as side-effecting)."""
    SENT.append(text)
    return "sent"


TOOLS = ToolRegistry([echo, always_fails, send])
HARMLESS = plan_of(step(1, "echo", {"text": "one"}))
SENDING = plan_of(step(1, "send", {"text": "hello"}))


class Clock:
    """The approval's clock (``authority.utc_now``), moved on by the test, not by the machine:
    how long a loaded machine takes between two answers never makes a request expire."""

    def __init__(self) -> None:
        self.at = datetime.now(UTC)

    def __call__(self) -> str:
        return self.at.isoformat()

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    made = Clock()
    monkeypatch.setattr(authority, "utc_now", made)
    return made


def started(use_models, ctx, plan=HARMLESS, *, by: str | None = None, **settings: Any):
    """Build a graph with ``settings``, start a run (by ``by``, as a Python caller says it)."""
    use_models(planner=scripted(plan_reply(plan), plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS, **settings)
    config = thread()
    if by is not None:
        config["configurable"]["planexec_caller"] = by
    out = graph.invoke({"task": "t"}, config, context=ctx())
    assert "__interrupt__" in out
    return graph, config


def answer(graph, config, ctx, resume: Any, **configurable: Any) -> dict[str, Any]:
    """Answer as a Python caller (``by`` in the answer) from a run with these configurables."""
    run = {"configurable": {**config["configurable"], **configurable}}
    run["configurable"].pop("planexec_caller", None)
    return graph.invoke(Command(resume=resume), run, context=ctx())


def test_approvers_refuse_others_the_plan_still_waits_and_nothing_ran(use_models, ctx):
    graph, config = started(use_models, ctx, SENDING, approvers=["alice", "permission:approve"])
    SENT.clear()
    out = answer(graph, config, ctx, {"action": "approve", "by": "bob"})
    request = out["__interrupt__"][0].value
    assert request["error"] == (
        "bob may not approve: not an approver (approvers: alice, permission:approve)"
    )
    assert SENT == [] and not graph.get_state(config).values.get("final")
    assert graph.get_state(config).next == ("approval",)
    assert out["decisions"][-1]["action"] == "refused"
    assert out["decisions"][-1]["feedback"] == request["error"]
    out = answer(graph, config, ctx, {"action": "approve"})  # nobody known: refused too
    assert "an unknown caller may not approve" in out["__interrupt__"][0].value["error"]
    out = answer(graph, config, ctx, {"action": "approve", "by": "alice"})
    assert out["final"]["status"] == "succeeded" and SENT == ["hello"]
    assert [d["action"] for d in out["decisions"]] == ["refused", "refused", "approve"]


def test_a_server_permission_makes_an_approver_and_by_cannot_claim_one(use_models, ctx):
    graph, config = started(use_models, ctx, approvers="permission:approve")
    out = answer(
        graph, config, ctx, {"action": "approve", "by": "alice"}, **server_config("eve", ["read"])
    )
    assert "eve may not approve: not an approver" in out["__interrupt__"][0].value["error"]
    out = answer(graph, config, ctx, {"action": "approve"}, **server_config("ann", ["approve"]))
    assert out["final"]["status"] == "succeeded"
    assert out["decisions"][-1]["by"] == {"id": "ann", "source": "server"}


def test_the_starter_may_reject_or_cancel_a_stranger_may_not(use_models, ctx):
    graph, config = started(use_models, ctx, by="sam", approvers="alice")
    out = answer(graph, config, ctx, {"action": "cancel", "by": "eve"})
    assert out["__interrupt__"][0].value["error"] == (
        "eve may not cancel: neither an approver nor who started this run (approvers: alice)"
    )
    out = answer(graph, config, ctx, {"action": "cancel", "by": "sam"})
    assert out["final"]["status"] == "cancelled"


def test_env_approvers_apply_when_build_graph_names_none(use_models, ctx, monkeypatch):
    monkeypatch.setenv("PLANEXEC_APPROVERS", " alice , bob ")
    graph, config = started(use_models, ctx)
    out = answer(graph, config, ctx, {"action": "approve", "by": "carl"})
    assert "(approvers: alice, bob)" in out["__interrupt__"][0].value["error"]
    out = answer(graph, config, ctx, {"action": "approve", "by": "bob"})
    assert out["final"]["status"] == "succeeded"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_maker_checker_the_starter_may_not_approve_side_effects(use_models, ctx, mode):
    graph, config = started(use_models, ctx, SENDING, by="alice", separate_approver=True)
    SENT.clear()

    def go(resume: Any) -> dict[str, Any]:
        run = {"configurable": {**config["configurable"]}}
        run["configurable"].pop("planexec_caller")
        if mode == "sync":
            return graph.invoke(Command(resume=resume), run, context=ctx())
        return asyncio.run(graph.ainvoke(Command(resume=resume), run, context=ctx()))

    out = go({"action": "approve", "by": "alice"})
    assert out["__interrupt__"][0].value["error"] == (
        "alice may not approve: alice started this run and the plan has side effects "
        "(separate_approver: another approver must approve it; alice may reject or cancel it)"
    )
    assert SENT == []
    edited = {"goal": "g", "steps": SENDING["steps"]}
    out = go({"action": "edit", "plan": edited, "by": "alice"})
    assert "alice may not edit" in out["__interrupt__"][0].value["error"]
    out = go({"action": "approve", "by": "bob"})
    assert out["final"]["status"] == "succeeded" and SENT == ["hello"]
    assert graph.get_state(config).values["started_by"] == {"id": "alice", "source": "python"}


def test_maker_checker_lets_the_starter_approve_a_harmless_plan_or_reject(use_models, ctx):
    graph, config = started(use_models, ctx, HARMLESS, by="alice", separate_approver=True)
    out = answer(graph, config, ctx, {"action": "approve", "by": "alice"})
    assert out["final"]["status"] == "succeeded"
    graph, config = started(use_models, ctx, SENDING, by="alice", separate_approver=True)
    out = answer(graph, config, ctx, {"action": "reject", "feedback": "no", "by": "alice"})
    assert out["decisions"][-1]["action"] == "reject"


def test_maker_checker_on_the_server_uses_the_servers_identities(use_models, ctx):
    use_models(planner=scripted(plan_reply(SENDING)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS, separate_approver=True)
    config = thread()
    config["configurable"].update(server_config("owner"))
    graph.invoke({"task": "t"}, config, context=ctx())
    out = graph.invoke(
        Command(resume={"action": "approve", "by": "someone-else"}), config, context=ctx()
    )
    assert "owner may not approve: owner started this run" in out["__interrupt__"][0].value["error"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_answer_after_expiry_is_expired_and_asked_again_fresh(use_models, ctx, mode, clock):
    events: list[dict[str, Any]] = []
    graph, config = started(
        use_models, ctx, approval_expires_after=0.2, approval_hook=events.append
    )
    first = graph.get_state(config).interrupts[0].value
    assert first["expires_at"] > first["asked_at"]
    clock.advance(0.3)
    if mode == "sync":
        out = answer(graph, config, ctx, {"action": "approve", "by": "alice"})
    else:
        out = asyncio.run(
            graph.ainvoke(
                Command(resume={"action": "approve", "by": "alice"}), config, context=ctx()
            )
        )
    again = out["__interrupt__"][0].value
    assert again["asked_at"] > first["asked_at"] and "expired" in again["error"]
    [expired] = out["decisions"]
    assert expired["action"] == "expired" and expired["by"]["id"] == "alice"
    assert [e["event"] for e in events] == ["waiting", "expired", "waiting"]
    out = answer(graph, config, ctx, {"action": "approve", "by": "alice"})
    assert out["final"]["status"] == "succeeded"
    assert [d["action"] for d in out["decisions"]] == ["expired", "approve"]


def test_a_replayed_node_keeps_its_asked_at(use_models, ctx):
    graph, config = started(use_models, ctx, approval_expires_after=60)
    first = graph.get_state(config).interrupts[0].value
    out = answer(graph, config, ctx, {"action": "nonsense"})  # refused: asked again, fresh
    again = out["__interrupt__"][0].value
    assert again["asked_at"] >= first["asked_at"]
    assert graph.get_state(config).interrupts[0].value["asked_at"] == again["asked_at"]


def test_the_same_rules_hold_for_a_failed_steps_question(use_models, ctx):
    plan = plan_of({**step(1, "always_fails", {"reason": "x"}), "on_failure": "ask"})
    graph, config = started(use_models, ctx, plan, approvers="alice")
    out = answer(graph, config, ctx, {"action": "approve", "by": "alice"})
    assert out["__interrupt__"][0].value["type"] == "step_failure"
    out = answer(graph, config, ctx, {"action": "retry", "step": 1, "by": "bob"})
    request = out["__interrupt__"][0].value
    assert request["refused"] == "bob may not retry: not an approver (approvers: alice)"
    assert out["decisions"][-1]["action"] == "refused"
    assert out["decisions"][-1]["kind"] == "step_failure"
    out = answer(graph, config, ctx, {"action": "skip", "step": 1, "by": "alice"})
    assert out["decisions"][-1]["action"] == "skip"


def test_a_failed_steps_question_expires_too(use_models, ctx, clock):
    plan = plan_of({**step(1, "always_fails", {"reason": "x"}), "on_failure": "ask"})
    graph, config = started(use_models, ctx, plan, approval_expires_after=0.2)
    out = answer(graph, config, ctx, {"action": "approve", "by": "alice"})
    first = out["__interrupt__"][0].value
    clock.advance(0.3)
    out = answer(graph, config, ctx, {"action": "skip", "step": 1, "by": "alice"})
    again = out["__interrupt__"][0].value
    assert again["type"] == "step_failure" and "expired" in again["refused"]
    assert again["asked_at"] > first["asked_at"]
    assert out["decisions"][-1]["action"] == "expired"


@pytest.mark.parametrize(
    ("settings", "env", "named"),
    [
        ({"approvers": ""}, {}, "approvers"),
        ({"approvers": ["alice", " "]}, {}, "approvers"),
        ({}, {"PLANEXEC_APPROVERS": "alice,,bob"}, "PLANEXEC_APPROVERS"),
        ({"separate_approver": "yes"}, {}, "separate_approver"),
        ({}, {"PLANEXEC_SEPARATE_APPROVER": "maybe"}, "PLANEXEC_SEPARATE_APPROVER"),
        ({"approval_expires_after": 0}, {}, "approval_expires_after"),
        ({}, {"PLANEXEC_APPROVAL_EXPIRES_AFTER": "soon"}, "PLANEXEC_APPROVAL_EXPIRES_AFTER"),
        ({"approval_hook": "ftp://x"}, {}, "approval_hook"),
        ({}, {"PLANEXEC_APPROVAL_HOOK": "not a url"}, "PLANEXEC_APPROVAL_HOOK"),
    ],
)
def test_bad_settings_are_refused_when_the_graph_is_built(monkeypatch, settings, env, named):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigurationError, match=named):
        build_graph(tools=TOOLS, **settings)


def _swap(graph, config, plan: dict[str, Any]) -> dict[str, Any]:
    """Replace the plan in state (an editable key) while its approval is pending."""
    current = graph.get_state(config).values["plan"]
    swapped = {**current, "steps": [{**current["steps"][0], **plan["steps"][0]}]}
    graph.update_state(config, {"plan": swapped})
    return graph.get_state(config).values["plan"]


@pytest.mark.parametrize("settings", [{}, {"approvers": ["bob"], "separate_approver": True}])
def test_an_answer_never_approves_a_plan_swapped_after_it_was_shown(use_models, ctx, settings):
    graph, config = started(use_models, ctx, HARMLESS, by="alice", **settings)
    shown = graph.get_state(config).interrupts[0].value
    assert [s["tool"] for s in shown["plan"]["steps"]] == ["echo"]
    SENT.clear()
    _swap(graph, config, SENDING)
    out = answer(graph, config, ctx, {"action": "approve", "by": "bob"})
    assert SENT == [] and not out.get("final")
    last = out["decisions"][-1]
    assert last["action"] == "refused" and last["by"]["id"] == "bob"
    assert last["feedback"].startswith("the plan changed since it was shown (v")
    assert last["feedback"].endswith("): answer again")
    request = out["__interrupt__"][0].value
    assert [s["tool"] for s in request["plan"]["steps"]] == ["send"]  # asked anew, current plan
    out = answer(graph, config, ctx, {"action": "approve", "by": "bob"})
    assert out["final"]["status"] == "succeeded" and SENT == ["hello"]
    assert out["decisions"][-1]["digest"] == request["digest"]


def test_an_answer_naming_the_current_plans_digest_still_approves_it(use_models, ctx):
    graph, config = started(use_models, ctx, HARMLESS)
    SENT.clear()
    swapped = _swap(graph, config, SENDING)
    current = graph.get_state(config).values
    from planexec.plan.doc import plan_digest

    digest = plan_digest(swapped)
    assert current["plan"] == swapped
    out = answer(graph, config, ctx, {"action": "approve", "digest": digest, "by": "bob"})
    assert out["final"]["status"] == "succeeded" and SENT == ["hello"]


def test_separate_approver_an_edit_adding_side_effects_is_a_proposal_not_an_approval(
    use_models, ctx
):
    graph, config = started(
        use_models, ctx, HARMLESS, by="carol", approvers=["alice", "bob"], separate_approver=True
    )
    SENT.clear()
    edited = {"goal": "g", "steps": SENDING["steps"]}
    out = answer(graph, config, ctx, {"action": "edit", "plan": edited, "by": "alice"})
    assert SENT == [] and not out.get("final")
    edit = out["decisions"][-1]
    assert (edit["action"], edit["by"]["id"]) == ("edit", "alice") and edit["edited"]
    request = out["__interrupt__"][0].value
    assert request["digest"] == edit["edited"]["digest"]
    assert [s["tool"] for s in request["plan"]["steps"]] == ["send"]
    out = answer(graph, config, ctx, {"action": "approve", "by": "alice"})
    assert out["__interrupt__"][0].value["error"] == (
        "alice may not approve: alice wrote this plan version and it has side effects "
        "(separate_approver: another approver must approve it; alice may reject or cancel it)"
    )
    assert SENT == []
    out = answer(graph, config, ctx, {"action": "approve", "by": "bob"})
    assert out["final"]["status"] == "succeeded" and SENT == ["hello"]
    assert [d["action"] for d in out["decisions"]] == ["edit", "refused", "approve"]


def test_separate_approver_an_edit_without_side_effects_is_still_approved_at_once(use_models, ctx):
    graph, config = started(
        use_models, ctx, SENDING, by="carol", approvers=["alice", "bob"], separate_approver=True
    )
    edited = {"goal": "g", "steps": HARMLESS["steps"]}
    out = answer(graph, config, ctx, {"action": "edit", "plan": edited, "by": "alice"})
    assert out["final"]["status"] == "succeeded"


@tool
def send_unless_failing(text: str) -> str:
    """Send the text, unless it is "fail" (side-effecting)."""
    if text == "fail":
        raise ValueError("it failed")
    SENT.append(text)
    return "sent"


def test_separate_approver_a_retry_with_new_args_needs_another_approver(use_models, ctx):
    plan = plan_of({**step(1, "send_unless_failing", {"text": "fail"}), "on_failure": "ask"})
    use_models(planner=scripted(plan_reply(plan)))
    tools = ToolRegistry([send_unless_failing])
    graph = build_graph(
        checkpointer=InMemorySaver(), tools=tools, approvers="alice,bob", separate_approver=True
    )
    config = thread()
    config["configurable"]["planexec_caller"] = "carol"
    graph.invoke({"task": "t"}, config, context=ctx(retry_initial_interval=0.0))
    SENT.clear()
    out = answer(graph, config, ctx, {"action": "approve", "by": "alice"})
    assert out["__interrupt__"][0].value["type"] == "step_failure"
    retry = {"action": "retry", "step": 1, "args": {"text": "hello"}, "by": "alice"}
    out = answer(graph, config, ctx, retry)
    request = out["__interrupt__"][0].value
    assert request.get("type") != "step_failure" and request["version"] == 2
    out = answer(graph, config, ctx, {"action": "approve", "by": "alice"})
    assert (
        "alice may not approve: alice wrote this plan version"
        in (out["__interrupt__"][0].value["error"])
    )
    assert SENT == []
    out = answer(graph, config, ctx, {"action": "approve", "by": "bob"})
    assert out["final"]["status"] == "succeeded" and SENT == ["hello"]
    assert out["decisions"][-1]["by"]["id"] == "bob" and out["decisions"][-1]["version"] == 2


@pytest.mark.parametrize("by", ["x" * 129, "alice\nbob", "al\x1bice"])
def test_an_identity_that_is_too_long_or_not_printable_is_refused(use_models, ctx, by):
    graph, config = started(use_models, ctx, HARMLESS)
    out = answer(graph, config, ctx, {"action": "approve", "by": by})
    assert not out.get("final")
    assert out["decisions"][-1]["action"] == "refused"
    assert "by: at most 128 printable characters" in out["decisions"][-1]["feedback"]
    assert by not in repr(out["decisions"])
    run = {"configurable": {**config["configurable"], "planexec_caller": by}}
    out = graph.invoke(Command(resume={"action": "approve"}), run, context=ctx())
    assert "by: at most 128 printable characters" in out["decisions"][-1]["feedback"]
    out = answer(graph, config, ctx, {"action": "approve", "by": "x" * 128})
    assert out["final"]["status"] == "succeeded"


def test_an_answer_to_a_failed_steps_question_never_applies_to_a_swapped_plan(use_models, ctx):
    plan = plan_of({**step(1, "send_unless_failing", {"text": "fail"}), "on_failure": "ask"})
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([send_unless_failing]))
    config = thread()
    graph.invoke({"task": "t"}, config, context=ctx(retry_initial_interval=0.0))
    out = answer(graph, config, ctx, {"action": "approve", "by": "bob"})
    assert out["__interrupt__"][0].value["type"] == "step_failure"
    SENT.clear()
    _swap(graph, config, plan_of(step(1, "send_unless_failing", {"text": "swapped"})))
    out = answer(graph, config, ctx, {"action": "retry", "step": 1, "by": "bob"})
    assert SENT == [] and not out.get("final")
    last = out["decisions"][-1]
    assert (last["action"], last["kind"], last["by"]["id"]) == ("refused", "step_failure", "bob")
    assert last["feedback"].startswith("the plan changed since it was shown (v")
    request = out["__interrupt__"][0].value
    assert request["plan"]["steps"][0]["args"] == {"text": "swapped"}  # asked anew: approval


def test_a_failed_steps_answer_naming_an_unfit_identity_is_refused(use_models, ctx):
    plan = plan_of({**step(1, "always_fails", {"reason": "x"}), "on_failure": "ask"})
    graph, config = started(use_models, ctx, plan)
    out = answer(graph, config, ctx, {"action": "approve", "by": "alice"})
    assert out["__interrupt__"][0].value["type"] == "step_failure"
    out = answer(graph, config, ctx, {"action": "skip", "step": 1, "by": "bob\nalice"})
    last = out["decisions"][-1]
    assert (last["action"], last["kind"]) == ("refused", "step_failure")
    assert last["feedback"] == "by: at most 128 printable characters"
    assert last["by"] == {"id": None, "source": "unknown"}


def test_a_refused_answer_does_not_renew_the_request(use_models, ctx, clock):
    """Answering (and being refused) cannot push a request's expiry back: only an expired
    request, or a changed plan, is asked again with a fresh time."""
    graph, config = started(use_models, ctx, approvers=["alice"], approval_expires_after=0.6)
    first = graph.get_state(config).interrupts[0].value
    clock.advance(0.35)
    out = answer(graph, config, ctx, {"action": "approve", "by": "mallory"})
    again = out["__interrupt__"][0].value
    assert "mallory may not approve" in again["error"]
    assert (again["asked_at"], again["expires_at"]) == (first["asked_at"], first["expires_at"])
    clock.advance(0.35)  # past the first deadline, not past one renewed by mallory's answer
    out = answer(graph, config, ctx, {"action": "approve", "by": "alice"})
    assert out["decisions"][-1]["action"] == "expired"
