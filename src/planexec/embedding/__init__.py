"""planexec inside other LangGraph applications: a parent graph's node, or an agent's tool.

As a node, or called from a parent's node: ``build_graph(output="embedded")``, compiled
without a checkpointer (it keeps its state in the parent's). Its input is the parent's
``task`` or ``messages``; it writes only ``messages`` and ``planexec`` (a
:class:`~planexec.state.PlanexecSummary`); its approval interrupt reaches the parent's
caller, whose ``Command(resume=...)`` finishes the run. Its settings are the parent context's
``planexec`` field or key (see :func:`planexec.context.context_of`).

As a tool of ``langchain.agents.create_agent`` (or any tool-calling graph): :func:`as_tool`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, merge_configs
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from planexec.admission import PlanexecGraph, is_nested
from planexec.errors import PlanexecError
from planexec.graph import build_graph
from planexec.nodes.summary import summarize
from planexec.state import PlanexecSummary

TOOL_DESCRIPTION = (
    "Plan and run a task of several steps: planexec writes a plan of tool steps, a human "
    "approves it, the steps run (in parallel where they can), and the answer comes back. "
    "Give the whole task in plain words."
)
"""What :func:`as_tool`'s tool tells the model, unless given another description."""


class TaskInput(BaseModel):
    """The tool's one argument: the task to plan and run."""

    task: str = Field(
        min_length=1, description="The task in plain words, as a user would ask for it."
    )


class ApprovalOutsideGraphError(PlanexecError, RuntimeError):
    """The tool's run waits for an approval, but no graph around it can pass the question on."""


def as_tool(
    graph: PlanexecGraph | None = None,
    *,
    name: str = "plan_and_run",
    description: str = TOOL_DESCRIPTION,
) -> BaseTool:
    """Return a LangChain tool that runs a task through planexec and returns its answer.

    ``graph`` is a planexec graph (else ``build_graph(output="embedded")``: the built-in tools,
    models from the context). Give it to ``create_agent(model, [tool], checkpointer=...)``:
    the plan's approval interrupt reaches the agent's caller (``result["__interrupt__"]``),
    and ``agent.invoke(Command(resume={"action": "approve"}), config)`` runs the plan and
    returns to the agent. The tool's content is the answer (and the files made); its artifact
    (``ToolMessage.artifact``) is the :class:`~planexec.state.PlanexecSummary`. The run's
    settings are the agent context's ``planexec`` field or key, as for a subgraph.
    """
    runner = graph if graph is not None else build_graph(output="embedded")

    def run(task: str, config: RunnableConfig) -> tuple[str, PlanexecSummary]:
        return tool_result(runner.invoke({"task": task}, _with_thread(config)))

    async def arun(task: str, config: RunnableConfig) -> tuple[str, PlanexecSummary]:
        return tool_result(await runner.ainvoke({"task": task}, _with_thread(config)))

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=name,
        description=description,
        args_schema=TaskInput,
        response_format="content_and_artifact",
    )


def _with_thread(config: RunnableConfig) -> RunnableConfig:
    """Return the tool's config, with a thread of its own when it was called outside a graph.

    Inside an agent the run is the agent's subgraph and uses its thread; called on its own
    (``tool.invoke(...)``), a run that needs no approval still gets a workspace of its own,
    and one that waits for approval says so (:class:`ApprovalOutsideGraphError`).
    """
    merged = merge_configs(ensure_config(), config)
    if is_nested(merged) or (merged.get("configurable") or {}).get("thread_id") is not None:
        return config
    configurable = {**(config.get("configurable") or {}), "thread_id": str(uuid.uuid4())}
    return {**config, "configurable": configurable}


def tool_result(output: Mapping[str, Any]) -> tuple[str, PlanexecSummary]:
    """Return a finished run's answer text and summary (from either output of the graph)."""
    if "__interrupt__" in output:
        raise ApprovalOutsideGraphError(
            "planexec's plan waits for approval, but its tool ran outside a graph that can "
            "ask: give the agent a checkpointer, e.g. create_agent(model, [tool], "
            "checkpointer=InMemorySaver()), and answer its interrupt with "
            "Command(resume={'action': 'approve'})"
        )
    summary = output.get("planexec") or summarize(output)
    text = summary["answer"]
    if summary["status"] != "succeeded":
        text = f"The run ended {summary['status']}. {text}"
    if summary["artifacts"]:
        text += "\n\nFiles: " + ", ".join(summary["artifacts"])
    return text, summary
