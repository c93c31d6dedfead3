"""A ``"tool": null`` step: the executor model does it, calling only the tools its step lists.

A bounded loop (``Context.max_executor_turns``): the model answers, or asks for tool calls that
run like a tool step's call (scrubbed, with the step's time limit) and whose results it reads
next turn. A call to a tool the step does not list is refused (:mod:`planexec.execution.steptools`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from planexec.concurrency.offloop import run_in_thread
from planexec.errors import ToolError
from planexec.execution.calls import call_tool, describe_error
from planexec.execution.round import ExecutionRound
from planexec.execution.steptools import Refusals, allowed_tools
from planexec.llm import prompts
from planexec.llm.usage import UsageCounter
from planexec.state import StepDoc
from planexec.storage.outputs import summarize
from planexec.storage.storable import to_storable


async def model_step(
    step: StepDoc,
    args: dict[str, Any],
    inputs: dict[int, Any],
    round_: ExecutionRound,
    config: RunnableConfig,
    counter: UsageCounter,
    refusals: Refusals,
) -> str:
    """Carry out a tool-less step with the executor model and its step's tools; return its answer.

    Each model call is counted by ``counter`` (a callback handler on the call); refused calls
    go to ``refusals``.
    """
    allowed = allowed_tools(step, round_.tools)
    model = await run_in_thread(lambda: round_.chat_models.for_role("executor", round_.context))
    bound = model.bind_tools(list(allowed.values())) if allowed else model
    messages: list[BaseMessage] = [
        SystemMessage(prompts.EXECUTOR_SYSTEM),
        HumanMessage(_step_prompt(step, args, inputs, round_)),
    ]
    for _ in range(round_.context.max_executor_turns):
        reply = await bound.ainvoke(messages, counter.config(config))
        if not isinstance(reply, AIMessage) or not reply.tool_calls:
            content = reply.content
            return content if isinstance(content, str) else json.dumps(content, default=str)
        messages.append(reply)
        for call in reply.tool_calls:
            if call["name"] not in allowed:
                text = refusals.refuse(call["name"], call["args"], list(allowed))
            else:
                text = await _tool_result(allowed[call["name"]], call["args"], round_, config)
            messages.append(ToolMessage(text, tool_call_id=call["id"]))
    raise ToolError(f"no answer after {round_.context.max_executor_turns} model turns")


def _step_prompt(
    step: StepDoc, args: dict[str, Any], inputs: dict[int, Any], round_: ExecutionRound
) -> str:
    shown_inputs = (
        "\n".join(f"- step {i}: {summarize(v, 4000)}" for i, v in inputs.items()) or "(none)"
    )
    return prompts.EXECUTOR_STEP.format(
        goal=round_.plan["goal"],
        id=step["id"],
        description=step["description"],
        expected_output=step["expected_output"] or "(not stated)",
        args=json.dumps(args, default=str)[:8000],
        inputs=shown_inputs,
    )


async def _tool_result(
    tool_: BaseTool, args: dict[str, Any], round_: ExecutionRound, config: RunnableConfig
) -> str:
    """Run one tool call the model asked for; return its result or error as text for the model."""
    try:
        result = await asyncio.wait_for(
            call_tool(tool_, args, config, round_.secrets), round_.context.step_timeout
        )
        return json.dumps(to_storable(result), ensure_ascii=False)[:20_000]
    except Exception as exc:  # reported back to the model
        return f"error: {describe_error(exc)}"
