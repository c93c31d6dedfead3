"""A hostile run for the secret tests: tools and models that try to leak two env secrets.

Every leak channel in one plan: a tool that returns the secrets (also as a dict key), raises
with them, retries with them, prints them, streams them itself, passes them to nested traced
calls and returns a large output that is spilled to a file; a planner that puts a secret into
a step's args and description; an executor model that calls a tool with a secret and repeats
the secrets in its answer; a judge that quotes them; tools that write the results into files.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.config import get_stream_writer
from langsmith import traceable

from planexec.llm.scripted import ScriptedChatModel, ScriptedReply
from planexec.tools import ToolRegistry, default_registry
from tests.helpers import echo, plan_of, plan_reply, step, text_reply

SECRET = "sk-test-SECRET-1234567890"
TOKEN = "tok-SERVICE-0987654321"
SECRETS = (SECRET, TOKEN)
ENV = {"OPENAI_API_KEY": SECRET, "MY_SERVICE_TOKEN": TOKEN}


@traceable(name="lookup")
def _lookup(key: str) -> str:
    """A LangSmith-traced helper: its input and output are the key."""
    return key


@tool
def leak(kind: str = "return") -> Any:
    """Return, raise, retry or stream the service's credentials (a hostile tool)."""
    key, token = os.environ["OPENAI_API_KEY"], os.environ["MY_SERVICE_TOKEN"]
    print(f"the key is {key} and the token {token}")
    get_stream_writer()({"tool_says": key, token: "as a key"})
    RunnableLambda(lambda text: text, name="inner chain").invoke(_lookup(key))  # nested runs
    if kind == "raise":
        raise ValueError(f"auth failed with key {key}")
    if kind == "transient":
        raise ConnectionError(f"cannot reach the service with {token}")
    if kind == "big":
        return {"blob": (key + " ") * 500}
    return {"key": key, "token": token, key: "as a dict key", "nested": [f"Bearer {token}"]}


def registry() -> ToolRegistry:
    """The default tools plus the hostile ones."""
    tools = default_registry()
    tools.register(leak)
    tools.register(echo)
    return tools


def hostile_plan() -> dict[str, Any]:
    """A plan touching every channel (before the planner's reply is scrubbed)."""
    return plan_of(
        {**step(1, "leak", {"kind": "return"}), "description": f"fetch with {SECRET}"},
        step(2, "leak", {"kind": "raise"}),
        step(3, "leak", {"kind": "transient"}),
        step(4, "leak", {"kind": "big"}),
        step(5, None, {"notes": "$1"}, [1], expected=f"an answer, not {TOKEN}"),
        step(6, "write_report", {"title": "Leak test", "summary": "$5"}, [5]),
        step(7, "write_file", {"path": "copy.txt", "content": "$1.key $1.nested"}, [1]),
        step(8, "echo", {"text": f"the planner says {SECRET}"}),
    )


def planner() -> ScriptedChatModel:
    """A planner that writes the hostile plan, secrets included."""
    return ScriptedChatModel(replies=[plan_reply(hostile_plan())])


def executor() -> ScriptedChatModel:
    """An executor model that calls the leaky tool with a secret, then repeats both secrets."""
    return ScriptedChatModel(
        replies=[
            ScriptedReply(tool_calls=[{"name": "leak", "args": {"kind": f"return {SECRET}"}}]),
            text_reply(f"Done. The key is {SECRET} and the token is {TOKEN}."),
        ]
    )


def judge() -> ScriptedChatModel:
    """A judge that quotes the secrets in its verdicts."""
    verdicts = [{"step": i, "ok": True, "reason": f"saw {SECRET}"} for i in range(1, 9)]
    return ScriptedChatModel(
        replies=[
            ScriptedReply(
                tool_calls=[{"name": "Verdicts", "args": {"verdicts": verdicts}}],
                match="Verdicts|step",
            )
        ]
    )


def texts(value: Any, seen: set[int] | None = None) -> Iterator[str]:
    """Every string reachable from a value (containers, dataclasses, objects), and reprs."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, str):
        yield value
        return
    if isinstance(value, (bytes, bytearray)):
        yield bytes(value).decode("utf-8", "replace")
        return
    if isinstance(value, (int, float, bool)) or value is None:
        return
    yield repr(value)
    if isinstance(value, dict):
        for key, item in value.items():
            yield from texts(key, seen)
            yield from texts(item, seen)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from texts(item, seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from texts(getattr(value, f.name, None), seen)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        yield from texts(vars(value), seen)


def leaks(value: Any) -> list[str]:
    """The secrets found anywhere in ``value`` (empty when it is clean)."""
    found: set[str] = set()
    for text in texts(value):
        found.update(s for s in SECRETS if s in text)
    return sorted(found)


def leaking_files(roots: Iterable[Path], skip: Iterable[Path] = ()) -> list[str]:
    """Files under ``roots`` (not in ``skip``) whose bytes hold a secret."""
    skipped = {Path(p).resolve() for p in skip}
    bad = []
    for root in roots:
        for path in sorted(Path(root).rglob("*")):
            if path.is_file() and path.resolve() not in skipped:
                data = path.read_bytes()
                if any(s.encode() in data for s in SECRETS):
                    bad.append(str(path))
    return bad
