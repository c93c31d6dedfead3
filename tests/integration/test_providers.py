"""Real providers misbehave: planexec through the real client (``openai:`` specs, langchain-openai,
the openai package, httpx) against a local OpenAI-compatible server that cuts replies, hangs,
splits characters across events, rate-limits and refuses (``tests/openai_server.Behaviour``).

Each class of the "real providers" issue, for the planner, the judge and the executor model,
under ``invoke`` and ``ainvoke``, policies ``first`` and ``never``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import Context, build_graph
from planexec.errors import ModelCallError, ModelTimeoutError, ProviderError
from planexec.tools import ToolRegistry
from tests.helpers import always_fails, plan_of, step, thread
from tests.openai_server import Behaviour, serve, token_pieces, tool_call_message

RECORDED: list[str] = []
_LOCK = threading.Lock()


@tool
def record(text: str) -> str:
    """Record a text (the side effect every test counts)."""
    with _LOCK:
        RECORDED.append(text)
    return f"recorded {text}"


THIRD = "charlie-is-the-third-token"
PLAN = plan_of(
    step(1, "record", {"text": "alpha"}),
    step(2, "record", {"text": "bravo"}),
    step(3, "record", {"text": THIRD}),
)
VERDICTS = {"verdicts": [{"step": 1, "ok": True}]}
ANSWER = "The executor model's answer."


def pieces_until(plan: dict[str, Any], marker: str) -> int:
    """How many streamed pieces of ``plan``'s JSON hold ``marker`` but not the whole of THIRD."""
    pieces = token_pieces(json.dumps(plan))
    for n in range(len(pieces)):
        text = "".join(pieces[:n])
        if marker in text:
            assert THIRD + '"' not in text
            return n
    raise AssertionError(f"{marker!r} is not in the plan")


def role(body: dict[str, Any]) -> str:
    """Which role a request comes from: planner, judge or executor."""
    choice = body.get("tool_choice")
    offered = {t["function"]["name"] for t in body.get("tools", [])}
    if isinstance(choice, dict) and choice["function"]["name"] == "Plan":
        return "planner"
    if offered == {"Verdicts"}:
        return "judge"
    return "executor"


@contextmanager
def provider(
    monkeypatch: pytest.MonkeyPatch,
    plan: dict[str, Any] = PLAN,
    behave: Callable[[dict[str, Any], int], Behaviour] = lambda body, n: Behaviour(),
    answer: str = ANSWER,
    plans: Iterator[dict[str, Any]] | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """Serve ``plan`` to the planner, VERDICTS to the judge, ``answer`` to the executor model.

    ``plans``: the next of them to each planner or replanner request, instead of ``plan``.
    """

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        who = role(body)
        if who == "planner":
            return tool_call_message("Plan", next(plans) if plans is not None else plan)
        if who == "judge":
            return tool_call_message("Verdicts", VERDICTS)
        return {"role": "assistant", "content": answer}

    with _LOCK:
        RECORDED.clear()
    with serve(reply, behave=behave) as (url, requests):
        monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        yield requests


def context(**overrides: Any) -> Context:
    base: dict[str, Any] = dict(
        planner_model="openai:planner",
        executor_model="openai:executor",
        evaluator_model="openai:judge",
        shared_folder="ws",
        retry_initial_interval=0.01,
    )
    return Context(**{**base, **overrides})


def graph_of(approval: str = "first") -> Any:
    """The graph as an operator builds it; its policy and the run's: the stricter holds."""
    tools = ToolRegistry([record])
    return build_graph(checkpointer=InMemorySaver(), tools=tools, approval=approval)


def go(graph: Any, value: Any, config: dict[str, Any], ctx: Context, how: str) -> Any:
    """``graph.invoke`` or ``graph.ainvoke`` (in a fresh loop), as a user calls them."""
    if how == "invoke":
        return graph.invoke(value, config, context=ctx)
    return asyncio.run(graph.ainvoke(value, config, context=ctx))


Behave = Callable[[dict[str, Any], int], Behaviour]


def on(role_name: str, how: Behaviour, times: int = 1) -> Behave:
    """Misbehave on the first ``times`` requests of one role, then behave."""
    seen = {"n": 0}

    def behave(body: dict[str, Any], n: int) -> Behaviour:
        if role(body) != role_name:
            return Behaviour()
        seen["n"] += 1
        return how if seen["n"] <= times else Behaviour()

    return behave


def recorded() -> list[str]:
    with _LOCK:
        return list(RECORDED)


HOWS = ["invoke", "ainvoke"]
CUTS = {
    "length": Behaviour(finish_reason="length"),
    "content_filter": Behaviour(finish_reason="content_filter"),
    "stream stops": Behaviour(finish_reason=None, end="close"),
}


# --- Only a reply that ended normally is a plan ------------------------------------------


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("cut", list(CUTS))
def test_a_cut_plan_is_never_approvable(monkeypatch, workspace, how, cut):
    """Cut inside step 3's argument: the approval never shows a plan, and the error says why."""
    behaviour = Behaviour(
        cut_after=pieces_until(PLAN, '"charlie'),
        finish_reason=CUTS[cut].finish_reason,
        end=CUTS[cut].end,
    )
    with provider(monkeypatch, behave=lambda body, n: behaviour) as requests:
        graph, config = graph_of(), thread()
        out = go(graph, {"task": "record three words"}, config, context(max_plan_repairs=0), how)
    assert "__interrupt__" not in out
    assert out["final"]["status"] == "failed"
    said = out["final"]["answer"]
    assert ("length" in said) if cut == "length" else True
    assert ("content_filter" in said) if cut == "content_filter" else True
    assert "cut" in said or "not finished" in said
    assert recorded() == []
    assert len(requests) == 1


@pytest.mark.parametrize("how", HOWS)
def test_a_cut_plan_is_asked_again_and_the_repair_says_why(monkeypatch, workspace, how):
    behaviour = Behaviour(cut_after=pieces_until(PLAN, '"charlie'), finish_reason="length")
    with provider(monkeypatch, behave=on("planner", behaviour)) as requests:
        graph, config = graph_of(), thread()
        out = go(graph, {"task": "record three words"}, config, context(), how)
    shown = out["__interrupt__"][0].value["plan"]["steps"]
    assert shown[2]["args"] == {"text": THIRD}
    repair = requests[1]["messages"][-1]["content"]
    assert "length" in repair and "cut" in repair


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("cut", list(CUTS))
def test_under_never_no_step_runs_on_a_cut_value(monkeypatch, workspace, how, cut):
    behaviour = Behaviour(
        cut_after=pieces_until(PLAN, '"charlie'),
        finish_reason=CUTS[cut].finish_reason,
        end=CUTS[cut].end,
    )
    with provider(monkeypatch, behave=lambda body, n: behaviour):
        graph, config = graph_of("never"), thread()
        ctx = context(approval="never", max_plan_repairs=0)
        out = go(graph, {"task": "record three words"}, config, ctx, how)
    assert out["final"]["status"] != "succeeded"
    assert "length" in out["final"]["answer"] if cut == "length" else True
    assert all(text in {"alpha", "bravo"} for text in recorded())  # whole steps only, once
    assert len(recorded()) == len(set(recorded()))


@pytest.mark.parametrize("how", HOWS)
def test_a_refused_plan_names_the_refusal(monkeypatch, workspace, how):
    refusal = "I can't help with recording words."
    with provider(monkeypatch, behave=lambda body, n: Behaviour(refusal=refusal)):
        out = go(graph_of(), {"task": "t"}, thread(), context(max_plan_repairs=0), how)
    assert out["final"]["status"] == "failed"
    assert refusal in out["final"]["answer"]
    assert recorded() == []


@pytest.mark.parametrize("approval", ["first", "never"])
@pytest.mark.parametrize("how", HOWS)
def test_a_refusal_is_asked_again_at_most_once(monkeypatch, workspace, how, approval):
    """A refusal is no repairable draft and no passing error: the streamed request (whose
    refusal the client drops) is asked once more, whole, and the run fails quoting it."""
    refusal = "I won't plan that."
    with provider(monkeypatch, behave=lambda body, n: Behaviour(refusal=refusal)) as requests:
        graph, ctx = graph_of(approval), context(approval=approval)  # repairs as by default
        out = go(graph, {"task": "t"}, thread(), ctx, how)
    assert out["final"]["status"] == "failed"
    assert refusal in out["final"]["answer"]
    assert refusal in out["error"]
    assert 1 <= len(requests) <= 2, [bool(r.get("stream")) for r in requests]
    assert recorded() == []


@pytest.mark.parametrize("how", HOWS)
def test_a_cut_executor_reply_is_not_a_result(monkeypatch, workspace, how):
    plan = plan_of(step(1, None, {"about": "x"}, expected="a sentence"))
    behaviour = Behaviour(cut_after=2, finish_reason="length")
    with provider(monkeypatch, plan=plan, behave=on("executor", behaviour, times=99)):
        graph, config = graph_of(), thread()
        go(graph, {"task": "t"}, config, context(max_replans=0), how)
        out = go(graph, Command(resume="approve"), config, context(max_replans=0), how)
    assert out["steps"]["1"]["status"] == "failed"
    assert "length" in out["steps"]["1"]["error"]
    assert out["final"]["status"] == "failed"


@pytest.mark.parametrize("how", HOWS)
def test_a_cut_judge_reply_gives_no_verdict_and_says_why(monkeypatch, workspace, how):
    plan = plan_of(step(1, "record", {"text": "alpha"}))
    behaviour = Behaviour(cut_after=3, finish_reason="length")
    with provider(monkeypatch, plan=plan, behave=on("judge", behaviour, times=99)):
        graph, config = graph_of(), thread()
        ctx = context(llm_judge=True, max_replans=0)
        go(graph, {"task": "t"}, config, ctx, how)
        out = go(graph, Command(resume="approve"), config, ctx, how)
    assert "length" in out["evaluation"]["reason"]


# --- Every model call has a deadline ------------------------------------------------------


@pytest.mark.parametrize("how", HOWS)
def test_a_planner_that_never_answers_ends_within_its_deadline(monkeypatch, workspace, how):
    with provider(monkeypatch, behave=on("planner", Behaviour(hang=True))):
        graph, config = graph_of(), thread()
        ctx = context(planner_timeouts={"total": 1.0})
        started = time.monotonic()
        with pytest.raises(ModelTimeoutError, match="planner model did not answer within 1"):
            go(graph, {"task": "t"}, config, ctx, how)
        assert time.monotonic() - started < 4.0
        out = go(graph, None, config, ctx, how)  # resumable: the planner asks again
    assert out["__interrupt__"][0].value["plan"]["steps"][2]["args"] == {"text": THIRD}


@pytest.mark.parametrize("how", HOWS)
def test_a_stream_of_keepalives_ends_at_the_idle_limit(monkeypatch, workspace, how):
    keepalive = Behaviour(cut_after=3, finish_reason=None, end="keepalive")
    with provider(monkeypatch, behave=on("planner", keepalive, times=99)):
        ctx = context(planner_timeouts={"idle": 0.6, "total": 60.0})
        started = time.monotonic()
        with pytest.raises(ModelTimeoutError, match="no part of its reply for 0.6"):
            go(graph_of(), {"task": "t"}, thread(), ctx, how)
        assert time.monotonic() - started < 4.0


@pytest.mark.parametrize("how", HOWS)
def test_under_never_a_provider_that_stops_mid_plan_ends_the_run_in_time(
    monkeypatch, workspace, how
):
    """Steps 1 and 2 started as they streamed; then only keep-alives: the run ends, recorded."""
    keepalive = Behaviour(cut_after=pieces_until(PLAN, '"charlie'), end="keepalive")
    with provider(monkeypatch, behave=on("planner", keepalive, times=99)):
        graph, config = graph_of("never"), thread()
        ctx = context(approval="never", planner_timeouts={"idle": 0.6, "total": 60.0})
        started = time.monotonic()
        out = go(graph, {"task": "record three words"}, config, ctx, how)
        assert time.monotonic() - started < 6.0
    assert out["final"]["status"] != "succeeded"
    assert "no part of its reply for 0.6 s" in out["final"]["answer"]
    assert sorted(recorded()) == ["alpha", "bravo"]  # the whole steps, once each; not charlie


@pytest.mark.parametrize("how", HOWS)
def test_a_cut_revision_is_never_run(monkeypatch, workspace, how):
    """The replanner's reply is cut: the revision is not run, and the answer says why."""
    plan = plan_of(step(1, "record", {"text": "alpha"}), step(2, "always_fails", {}))
    revision = plan_of(step(3, "record", {"text": THIRD}))
    answers = iter([plan, revision])
    behaviours = iter([Behaviour(), Behaviour(cut_after=pieces_until(revision, '"charlie'),
                                              finish_reason="length")])  # fmt: skip

    def reply_plan(body: dict[str, Any], n: int) -> Behaviour:
        return next(behaviours) if role(body) == "planner" else Behaviour()

    with provider(monkeypatch, behave=reply_plan, plans=answers):
        graph = build_graph(
            checkpointer=InMemorySaver(), tools=ToolRegistry([record, always_fails])
        )
        config, ctx = thread(), context(max_plan_repairs=0, approval="first")
        go(graph, {"task": "t"}, config, ctx, how)
        out = go(graph, Command(resume="approve"), config, ctx, how)
    assert recorded() == ["alpha"]
    assert out["final"]["status"] == "partial"
    assert "length" in out["final"]["answer"]


@pytest.mark.parametrize("how", HOWS)
def test_a_judge_that_never_answers_ends_within_its_deadline(monkeypatch, workspace, how):
    plan = plan_of(step(1, "record", {"text": "alpha"}))
    with provider(monkeypatch, plan=plan, behave=on("judge", Behaviour(hang=True))):
        graph, config = graph_of(), thread()
        ctx = context(llm_judge=True, evaluator_timeouts={"total": 1.0})
        go(graph, {"task": "t"}, config, ctx, how)
        started = time.monotonic()
        with pytest.raises(ModelTimeoutError, match="evaluator model did not answer within 1"):
            go(graph, Command(resume="approve"), config, ctx, how)
        assert time.monotonic() - started < 4.0
        out = go(graph, None, config, ctx, how)  # resumable: the judge is asked again
    assert out["final"]["status"] == "succeeded"
    assert recorded() == ["alpha"]


@pytest.mark.parametrize("how", HOWS)
def test_an_executor_model_that_never_answers_fails_its_step_in_time(monkeypatch, workspace, how):
    plan = plan_of(step(1, None, {"about": "x"}))
    with provider(monkeypatch, plan=plan, behave=on("executor", Behaviour(hang=True), 99)):
        graph, config = graph_of(), thread()
        ctx = context(executor_timeouts={"total": 1.0}, max_replans=0)
        go(graph, {"task": "t"}, config, ctx, how)
        started = time.monotonic()
        out = go(graph, Command(resume="approve"), config, ctx, how)
        assert time.monotonic() - started < 4.0
    assert out["steps"]["1"]["status"] == "failed"
    assert "executor model did not answer within 1" in out["steps"]["1"]["error"]


def test_model_timeouts_have_defaults_and_are_checked():
    ctx = Context()
    for name in ("planner_timeouts", "executor_timeouts", "evaluator_timeouts"):
        limits = getattr(ctx, name)
        assert 0 < limits["connect"] <= limits["idle"] <= limits["total"] <= 600
    assert Context(planner_timeouts={"idle": 5}).planner_timeouts["idle"] == 5
    from planexec.context import InvalidContextError

    for bad in ({"total": 0}, {"total": -1}, {"total": float("inf")}, {"later": 3}):
        with pytest.raises(InvalidContextError, match="planner_timeouts"):
            Context(planner_timeouts=bad)


# --- Clients are never bound to a loop that can close ------------------------------------


def test_many_sync_runs_in_one_process_all_reach_the_model(monkeypatch, workspace):
    plan = plan_of(step(1, None, {"about": "x"}, expected="a sentence"))
    with provider(monkeypatch, plan=plan) as requests:
        graph = graph_of()
        for how in ["invoke", "invoke", "invoke", "ainvoke", "invoke"]:
            config = thread()
            go(graph, {"task": "t"}, config, context(), how)
            out = go(graph, Command(resume="approve"), config, context(), how)
            assert out["final"]["status"] == "succeeded", out["final"]
            assert out["steps"]["1"]["output"] == ANSWER
    assert len(requests) == 10


def test_sync_runs_on_many_threads_at_once_all_reach_the_model(monkeypatch, workspace):
    plan = plan_of(step(1, None, {"about": "x"}, expected="a sentence"))
    results: list[str] = []
    with provider(monkeypatch, plan=plan):
        graph = graph_of()

        def one() -> None:
            config = thread()
            graph.invoke({"task": "t"}, config, context=context())
            out = graph.invoke(Command(resume="approve"), config, context=context())
            results.append(out["final"]["status"])

        threads = [threading.Thread(target=one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert results == ["succeeded"] * 4


# --- Text is decoded once, whole -------------------------------------------------------------

WORDS = ["party 🎉 time", "naïve café ☕ 😀🇫🇷"]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("policy", ["first", "never"])
def test_characters_split_across_events_reach_the_step_whole(monkeypatch, workspace, how, policy):
    plan = plan_of(step(1, "record", {"text": WORDS[0]}), step(2, "record", {"text": WORDS[1]}))
    split = Behaviour(split_unicode=True)
    with provider(monkeypatch, plan=plan, behave=lambda body, n: split, answer=WORDS[1]):
        graph, config = graph_of(policy), thread()
        ctx = context(approval=policy)
        out = go(graph, {"task": "t"}, config, ctx, how)
        if policy == "first":
            shown = out["__interrupt__"][0].value["plan"]["steps"]
            assert [s["args"]["text"] for s in shown] == WORDS
            out = go(graph, Command(resume="approve"), config, ctx, how)
    assert out["final"]["status"] == "succeeded"
    assert sorted(recorded()) == sorted(WORDS)


@pytest.mark.parametrize("how", HOWS)
def test_an_executor_reply_split_inside_characters_is_whole(monkeypatch, workspace, how):
    plan = plan_of(step(1, None, {"about": "x"}, expected="a sentence"))
    split = Behaviour(split_unicode=True)
    with provider(monkeypatch, plan=plan, behave=lambda body, n: split, answer=WORDS[1]):
        graph, config = graph_of(), thread()
        go(graph, {"task": "t"}, config, context(), how)
        out = go(graph, Command(resume="approve"), config, context(), how)
    assert out["steps"]["1"]["output"] == WORDS[1]


# --- Back-pressure is honoured -------------------------------------------------------------


def rate_limited(seconds: str) -> Behaviour:
    return Behaviour(
        status=429,
        headers={"Retry-After": seconds},
        error={"message": "Rate limit reached for requests", "type": "requests", "code": None},
    )


@pytest.mark.parametrize("how", HOWS)
def test_retry_after_is_waited_for(monkeypatch, workspace, how):
    with provider(monkeypatch, behave=on("planner", rate_limited("2"))) as requests:
        out = go(graph_of(), {"task": "t"}, thread(), context(), how)
    assert "__interrupt__" in out
    assert len(requests) == 2
    assert requests[1]["at"] - requests[0]["at"] >= 1.95


@pytest.mark.parametrize("how", HOWS)
def test_a_retry_after_past_the_deadline_fails_at_once_and_says_so(monkeypatch, workspace, how):
    with provider(monkeypatch, behave=on("planner", rate_limited("30"), 99)) as requests:
        started = time.monotonic()
        with pytest.raises(ProviderError, match=r"429.*Rate limit reached.*30 s"):
            go(graph_of(), {"task": "t"}, thread(), context(planner_timeouts={"total": 5}), how)
        assert time.monotonic() - started < 3.0
    assert len(requests) == 1


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [
        (429, "insufficient_quota", "You exceeded your current quota"),
        (400, "context_length_exceeded", "This model's maximum context length is 128000 tokens"),
        (401, "invalid_api_key", "Incorrect API key provided"),
    ],
)
@pytest.mark.parametrize("how", HOWS)
def test_errors_that_cannot_pass_are_not_retried(
    monkeypatch, workspace, how, status, code, message
):
    error = {"message": message, "type": "invalid_request_error", "code": code}
    failing = Behaviour(status=status, error=error)
    with (
        provider(monkeypatch, behave=lambda body, n: failing) as requests,
        pytest.raises(ModelCallError) as raised,
    ):
        go(graph_of(), {"task": "t"}, thread(), context(), how)
    assert len(requests) == 1
    assert message in str(raised.value) and str(status) in str(raised.value)
    assert code in str(raised.value)


# --- Be liberal in what real models write ---------------------------------------------------


@pytest.mark.parametrize("how", HOWS)
def test_null_optional_fields_are_read_as_left_out(monkeypatch, workspace, how):
    plan = {
        "goal": "g",
        "steps": [
            {"id": 1, "tool": "record", "args": {"text": "alpha"}, "description": None,
             "depends_on": None, "expected_output": None, "on_failure": None, "tools": None},
            {"id": 2, "tool": None, "args": None, "description": "say it", "depends_on": [1],
             "expected_output": None, "tools": None},
        ],
    }  # fmt: skip
    with provider(monkeypatch, plan=plan):
        out = go(graph_of(), {"task": "t"}, thread(), context(max_plan_repairs=0), how)
    steps = out["__interrupt__"][0].value["plan"]["steps"]
    assert steps[0]["depends_on"] == [] and steps[1]["args"] == {}


@pytest.mark.parametrize("how", HOWS)
def test_a_think_block_before_the_json_is_read_past(monkeypatch, workspace, how):
    text = "<think>\nThe user wants {three} words; steps: [1, 2].\n</think>\n" + json.dumps(PLAN)
    with provider(monkeypatch, behave=on("planner", Behaviour(content=text))):
        out = go(graph_of(), {"task": "t"}, thread(), context(max_plan_repairs=0), how)
    assert out["__interrupt__"][0].value["plan"]["steps"][2]["args"] == {"text": THIRD}


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("policy", ["first", "never"])
def test_tool_call_deltas_that_repeat_the_name_are_one_call(monkeypatch, workspace, how, policy):
    with provider(monkeypatch, behave=on("planner", Behaviour(repeat_name=True))):
        graph, config = graph_of(policy), thread()
        ctx = context(approval=policy, max_plan_repairs=0)
        out = go(graph, {"task": "t"}, config, ctx, how)
    if policy == "first":
        assert out["__interrupt__"][0].value["plan"]["steps"][2]["args"] == {"text": THIRD}
    else:
        assert out["final"]["status"] == "succeeded"
        assert sorted(recorded()) == sorted(["alpha", "bravo", THIRD])


# --- Found by a hostile review -------------------------------------------------------------


@pytest.mark.parametrize("how", HOWS)
def test_a_judge_past_its_client_read_timeout_ends_at_its_total_deadline(
    monkeypatch, workspace, how
):
    """langchain-openai wraps a read timeout in its own OpenAITimeoutError: still the model
    layer's to retry within the deadline, not the node's three times over."""
    plan = plan_of(step(1, "record", {"text": "alpha"}))
    with provider(monkeypatch, plan=plan, behave=on("judge", Behaviour(hang=True), 99)) as requests:
        graph, config = graph_of(), thread()
        ctx = context(llm_judge=True, evaluator_timeouts={"idle": 0.8, "total": 2.0})
        go(graph, {"task": "t"}, config, ctx, how)
        started = time.monotonic()
        with pytest.raises(ModelTimeoutError, match="evaluator model did not answer within 2"):
            go(graph, Command(resume="approve"), config, ctx, how)
        assert time.monotonic() - started < 4.0
    assert 1 <= len([r for r in requests if role(r) == "judge"]) <= 3


@pytest.mark.parametrize("how", HOWS)
def test_a_provider_nobody_answers_for_is_a_provider_error(monkeypatch, workspace, how):
    from tests.servers import free_port

    monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")  # nobody there
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"\(no HTTP status .*Connection.*after 3 tries"):
        go(graph_of(), {"task": "t"}, thread(), context(planner_timeouts={"total": 20.0}), how)
    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize("how", HOWS)
def test_an_error_event_inside_a_200_stream_is_a_provider_error_with_its_words(
    monkeypatch, workspace, how
):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-secret-123456789")
    error = {"message": "model overloaded (tok-secret-123456789)", "type": "invalid_request_error",
             "code": "bad_request"}  # fmt: skip
    with (
        provider(monkeypatch, behave=lambda body, n: Behaviour(sse_error=error)) as requests,
        pytest.raises(ProviderError, match="bad_request.*model overloaded") as raised,
    ):
        go(graph_of(), {"task": "t"}, thread(), context(), how)
    assert len(requests) == 1  # not a code that may pass
    assert "tok-secret-123456789" not in repr(raised.value) + str(raised.value)


@pytest.mark.parametrize("how", HOWS)
def test_a_judge_reply_with_no_choices_gives_no_verdict_and_says_why(monkeypatch, workspace, how):
    plan = plan_of(step(1, "record", {"text": "alpha"}))
    with provider(monkeypatch, plan=plan, behave=on("judge", Behaviour(no_choices=True), 99)):
        graph, config = graph_of(), thread()
        ctx = context(llm_judge=True, max_replans=0)
        go(graph, {"task": "t"}, config, ctx, how)
        out = go(graph, Command(resume="approve"), config, ctx, how)
    assert out["final"]["status"] == "succeeded"
    assert "could not be read" in out["evaluation"]["reason"]


@pytest.mark.parametrize("how", HOWS)
def test_a_finish_reason_said_twice_is_one_normal_end(monkeypatch, workspace, how):
    with provider(monkeypatch, behave=on("planner", Behaviour(finish_twice=True))):
        out = go(graph_of(), {"task": "t"}, thread(), context(max_plan_repairs=0), how)
    assert out["__interrupt__"][0].value["plan"]["steps"][2]["args"] == {"text": THIRD}


def test_one_empty_stream_does_not_stop_streaming_for_later_runs(monkeypatch, workspace):
    with provider(monkeypatch, behave=on("planner", Behaviour(empty_stream=True))) as requests:
        graph = graph_of()
        first = go(graph, {"task": "t"}, thread(), context(), "invoke")
        second = go(graph, {"task": "t"}, thread(), context(), "invoke")
    assert "__interrupt__" in first and "__interrupt__" in second
    assert [bool(r.get("stream")) for r in requests] == [True, False, True]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("value", ["nan", "inf", "-3", "soon"])
def test_a_retry_after_that_is_no_number_of_seconds_is_a_short_backoff(
    monkeypatch, workspace, how, value
):
    with provider(monkeypatch, behave=on("planner", rate_limited(value))) as requests:
        out = go(graph_of(), {"task": "t"}, thread(), context(), how)
    assert "__interrupt__" in out
    assert len(requests) == 2 and requests[1]["at"] - requests[0]["at"] < 3.0


class _Stuck(BaseChatModel):
    """A custom model whose async code blocks (time.sleep) or cancels itself."""

    how: str = "block"

    @property
    def _llm_type(self) -> str:
        return "stuck"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        raise AssertionError("async runs use the async API")

    async def _agenerate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        if self.how == "cancel":
            raise asyncio.CancelledError
        if self.how == "exit":
            raise SystemExit(3)
        time.sleep(3.0)  # blocks whatever loop it runs on
        raise AssertionError("unreachable in time")


def test_a_custom_model_that_blocks_its_loop_holds_only_its_own_run(monkeypatch, workspace):
    """Found by a hostile review: every model call shared one loop, so one blocking custom
    model stalled every other run's model calls in the process."""
    stuck = build_graph(InMemorySaver(), tools=ToolRegistry([record]), models={"planner": _Stuck()})
    results: dict[str, Any] = {}

    async def stuck_run() -> None:
        ctx = context(planner_timeouts={"total": 1.0})
        with pytest.raises(ModelTimeoutError):
            await stuck.ainvoke({"task": "t"}, thread(), context=ctx)
        results["stuck"] = "timed out"

    with provider(monkeypatch):
        blocker = threading.Thread(target=lambda: asyncio.run(stuck_run()))
        blocker.start()
        time.sleep(0.3)
        started = time.monotonic()
        results["out"] = go(graph_of(), {"task": "t"}, thread(), context(), "ainvoke")
        results["took"] = time.monotonic() - started
        blocker.join(10)
    assert "__interrupt__" in results["out"]
    assert results["took"] < 2.0
    assert results["stuck"] == "timed out"


def test_a_model_that_cancels_itself_fails_at_once(workspace):
    """Its async code raises CancelledError (an async run: a sync one uses its sync code)."""
    graph = build_graph(
        InMemorySaver(), tools=ToolRegistry([record]), models={"planner": _Stuck(how="cancel")}
    )
    started = time.monotonic()
    with pytest.raises(Exception, match="CancelledError"):  # LangChain's words or planexec's
        go(graph, {"task": "t"}, thread(), context(planner_timeouts={"total": 30.0}), "ainvoke")
    assert time.monotonic() - started < 3.0


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("who", ["judge", "executor"])
def test_every_role_waits_for_retry_after(monkeypatch, workspace, how, who):
    plan = plan_of(step(1, None, {"about": "x"}, expected="a sentence"))
    with provider(monkeypatch, plan=plan, behave=on(who, rate_limited("1.5"))) as requests:
        graph, config = graph_of(), thread()
        ctx = context(llm_judge=True, max_replans=0)
        go(graph, {"task": "t"}, config, ctx, how)
        out = go(graph, Command(resume="approve"), config, ctx, how)
    assert out["final"]["status"] == "succeeded", out["final"]
    asked = [r for r in requests if role(r) == who]
    assert len(asked) == 2 and asked[1]["at"] - asked[0]["at"] >= 1.45


@pytest.mark.parametrize("how", HOWS)
def test_an_error_event_of_plain_text_is_a_provider_error(monkeypatch, workspace, how):
    overloaded = Behaviour(sse_error="upstream overloaded")
    with (
        provider(monkeypatch, behave=lambda body, n: overloaded) as requests,
        pytest.raises(ProviderError, match="upstream overloaded .after 3 tries"),
    ):
        go(graph_of(), {"task": "t"}, thread(), context(), how)
    assert len(requests) == 3  # overloaded: it may pass, so asked again within the deadline


@pytest.mark.parametrize("how", HOWS)
def test_a_stream_that_turns_unreadable_is_asked_again(monkeypatch, workspace, how):
    with provider(monkeypatch, behave=on("planner", Behaviour(garbage_after=3))) as requests:
        out = go(graph_of(), {"task": "t"}, thread(), context(max_plan_repairs=1), how)
    assert out["__interrupt__"][0].value["plan"]["steps"][2]["args"] == {"text": THIRD}
    assert "could not be read" in requests[1]["messages"][-1]["content"]


def test_an_exit_in_a_custom_models_async_code_fails_the_call_at_once(workspace):
    # an exit raised by a model's own code is the model's failure, not the caller's exit: it
    # must not stop the caller's loop (on a server, every run's), and sync runs see the same
    graph = build_graph(
        InMemorySaver(), tools=ToolRegistry([record]), models={"planner": _Stuck(how="exit")}
    )
    started = time.monotonic()
    with pytest.raises(ModelCallError, match="the model's call raised SystemExit"):
        go(graph, {"task": "t"}, thread(), context(planner_timeouts={"total": 30.0}), "ainvoke")
    assert time.monotonic() - started < 3.0


STREAM_ONLY = """
import asyncio, sys, time
sys.path[:0] = {paths!r}
from typing import Any
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk
from planexec.llm import calls as modelcalls
from planexec.errors import ModelTimeoutError
from planexec.llm.scrubbed import ScrubbedChatModel

class StreamOnly(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "stream-only"

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(30)  # a sync call that hangs

    async def _astream(self, *args: Any, **kwargs: Any) -> Any:
        yield ChatGenerationChunk(message=AIMessageChunk(content="x"))

model = ScrubbedChatModel.around(StreamOnly(), modelcalls.Limits(total=1.0), "executor")
try:
    asyncio.run(model.ainvoke("hi"))
except ModelTimeoutError:
    print("timed out", flush=True)
"""


def test_a_hung_sync_call_of_a_stream_only_model_never_holds_the_process_at_exit(tmp_path):
    """Found by a hostile review: LangChain ran its sync code in the worker loop's default
    executor, whose threads the interpreter waits for at exit."""
    import subprocess
    import sys
    from pathlib import Path

    import planexec

    paths = [str(Path(planexec.__file__).parents[1]), str(Path(__file__).parents[2])]
    script = tmp_path / "stream_only.py"
    script.write_text(STREAM_ONLY.format(paths=paths))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=20)
    assert done.stdout.strip() == "timed out", done.stderr[-2000:]
