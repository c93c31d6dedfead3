"""Your tools, your model: planexec planning over tools of your own, with a model you choose.

    python examples/your_tools.py [WORKSPACE]

The tools (a stock quote, a position's value, a price history, its change, a note saved into
the run's workspace) are plain Python; the run plans with them, stops for your approval, runs
the approved plan and prints the answer, each step's output (the price history is large, so
planexec keeps it in a file: read back here) and the note the run wrote.

The model: with ``OPENAI_BASE_URL`` or ``OPENAI_API_KEY`` set, ``$EXAMPLE_MODEL`` (default
``gpt-4.1-mini``) at that OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, llama.cpp, LM
Studio...); else, offline, the scripted model replaying ``your_tools_replies.json`` (no network,
no key). The guide that explains each part: docs/guides/your-tools-your-model.md.

The CLI takes the same tools: ``planexec run "..." --tools examples/your_tools.py:portfolio_tools``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from typing_extensions import TypedDict

from planexec import ToolRegistry, build_graph
from planexec.llm.scripted import ScriptedChatModel
from planexec.tools import current_workspace

HERE = Path(__file__).resolve().parent
REPLIES = HERE / "your_tools_replies.json"
TASK = "What is my portfolio worth? I hold 10 ACME. Save the figure to portfolio.txt."
PRICES = {"ACME": 125.5, "GLOBEX": 48.25}


@tool
def quote(ticker: str) -> float:
    """Return the latest price of a stock, in USD."""
    return PRICES[ticker]


quote.metadata = {"side_effects": False}  # @tool takes no metadata=: declare it harmless here


def position_value(shares: float, price: float) -> float:
    """Return what a number of shares at a price is worth, in USD."""
    return round(shares * price, 2)


def price_history(ticker: str, days: int = 365) -> list[float]:
    """Return a stock's daily closing prices, oldest first, in USD."""
    last = PRICES[ticker]
    first = round(last / 1.255, 2)
    return [round(first + (last - first) * day / (days - 1), 2) for day in range(days)]


class Change(TypedDict):
    """How a price series changed from its first value to its last."""

    first: float
    last: float
    change_pct: float


def change_pct(prices: list[float]) -> Change:
    """Return how much a price series changed, in percent of its first price."""
    first, last = prices[0], prices[-1]
    return {"first": first, "last": last, "change_pct": round((last - first) / first * 100, 2)}


class Saved(TypedDict):
    """A file a tool wrote, relative to the run's workspace."""

    path: str


def save_note(filename: str, text: str) -> Saved:
    """Write a text note to a file of the run's workspace."""
    current_workspace().write_bytes(filename, text.encode("utf-8"))  # never a bare open()
    return {"path": filename}


def portfolio_tools() -> ToolRegistry:
    """Return the example's tools, each with its side effects declared."""
    registry = ToolRegistry()
    registry.register(quote)  # its metadata says: no side effects
    registry.register(position_value, side_effects=False)
    registry.register(price_history, side_effects=False)
    registry.register(change_pct, side_effects=False)
    registry.register(save_note, side_effects=True, file_fields=["path"])
    return registry


def chat_model() -> BaseChatModel:
    """Return the model at ``$OPENAI_BASE_URL`` (or OpenAI's), else the offline scripted one."""
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        name = os.environ.get("EXAMPLE_MODEL", "gpt-4.1-mini")
        return init_chat_model(
            f"openai:{name}",
            base_url=os.environ.get("OPENAI_BASE_URL"),  # None: OpenAI's own
            api_key=os.environ.get("OPENAI_API_KEY", "not-needed"),  # local servers take any
        )
    return ScriptedChatModel.from_file(REPLIES)


def main(folder: str) -> int:
    """Plan, approve, run; print the answer, the outputs and the file written. Exit status."""
    model = chat_model()
    graph = build_graph(
        checkpointer=InMemorySaver(),
        tools=portfolio_tools(),
        workspace=folder,  # the one folder the run's tools read and write
        models={"planner": model, "executor": model},
    )
    config = {"configurable": {"thread_id": "portfolio-1"}}

    stream: Any = {"task": TASK}
    while True:  # the first pass plans and stops at the approval; the second runs the plan
        for mode, chunk in graph.stream(stream, config, stream_mode=["updates", "custom"]):
            if mode == "custom" and chunk.get("event") == "step_finished":
                print(f"  step {chunk['step']} done: {chunk['summary'][:70]}")
        interrupts = graph.get_state(config).interrupts
        if not interrupts:
            break
        request = interrupts[0].value
        print(f"plan v{request['version']}: {request['plan']['goal']}")
        for step in request["plan"]["steps"]:
            print(f"  {step['id']}. {step['description']}")
        print(f"tools that write or send: {', '.join(request['side_effect_tools']) or 'none'}")
        print("approving")
        stream = Command(resume={"action": "approve", "digest": request["digest"]})

    values = graph.get_state(config).values
    final = values["final"]
    print(f"status: {final['status']}")
    print(f"answer: {final['answer']}")
    for step_id, record in sorted(values["steps"].items(), key=lambda item: int(item[0])):
        output = graph.step_output(config, step_id)  # in state, or read back from its file
        kept = "in a file" if record.get("output_file") else "in state"
        print(f"output {step_id} ({kept}): {str(output)[:70]}")
    for name in final["artifacts"]:
        print(f"{name}: {Path(folder, name).read_text(encoding='utf-8')}")
    return 0 if final["status"] == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "your-tools-workspace"))
