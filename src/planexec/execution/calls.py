"""One tool call of a step, as planexec makes it: off the loop, scrubbed, failures described.

The real call runs quietly in its own thread (async tools on their own loop, see
:mod:`planexec.concurrency.toolcalls`): callbacks and traces, if there are any, see a stand-in
run with scrubbed arguments and result (:mod:`planexec.llm.scrubbed`), and a failure is raised as
:class:`ToolFailed` (or :class:`TransientToolFailed`) with a scrubbed message.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import ValidationError

from planexec.concurrency import toolcalls
from planexec.concurrency.offloop import run_in_thread
from planexec.concurrency.toolcalls import StepTimeout
from planexec.errors import ToolError, TransientToolError, is_transient
from planexec.recording import RecordedToolFailure, Recording, recording_in_use
from planexec.recording.replayed import REPLAYED_METADATA, mark_replayed
from planexec.redaction.secrets import redact
from planexec.redaction.untraced import ToolRun, observed, quiet_config
from planexec.redaction.untraced import quiet as untraced
from planexec.storage.storable import UnstorableValueError, to_storable
from planexec.tools.returns import check_output


class ToolFailed(ToolError):
    """A tool's failure as planexec reports it: the scrubbed description of what it raised."""


class TransientToolFailed(ToolFailed, TransientToolError):
    """A tool's failure that may pass on its own (it raised a transient error): retried."""


async def call_tool(
    tool_: BaseTool, args: dict[str, Any], config: RunnableConfig, secrets: list[str]
) -> Any:
    """Invoke a tool; return its result as JSON data with every ``secrets`` value replaced.

    A result that does not fit the tool's declared output schema fails the call
    (:func:`planexec.tools.returns.check_output`): no dependent ever sees it. ``config``
    names and tags the stand-in run; what the tool writes to the stream is scrubbed.
    A replayed output passes the very same checks (storable, the output schema, every secret
    of this run replaced): only where it comes from differs. A call served from a recording
    marks its step replayed; in a replay every call's stand-in run (none is made live) has the
    metadata ``planexec_replayed: true``.

    The one place every tool call of a step passes (a tool step's, an executor model's), so
    the one place a recording (:mod:`planexec.recording`, set by ``build_graph``) keeps each
    call's output or failure, or in a replay serves it without calling the tool.
    """
    recording = recording_in_use()  # build_graph's: record, or replay without calling the tool
    replaying = recording is not None and recording.replaying

    async def work() -> Any:
        problem: tuple[str, bool] | None = None
        with untraced():
            try:
                if recording is not None and replaying:  # where the value comes from, only
                    given = await _replayed(recording, tool_.name, args, secrets)
                else:
                    given = await toolcalls.call_isolated(tool_, args, quiet_config(secrets))
                value = to_storable(given)
                check_output(tool_, value)
                value = redact(value, secrets)
            except Exception as exc:  # reported as a scrubbed ToolFailed
                problem = (redact(describe_error(exc), secrets), is_transient(exc))
            else:
                if recording is not None and recording.recording:
                    keep = partial(recording.keep_tool, tool_.name, args, value, secrets=secrets)
                    await run_in_thread(keep)
                return value
        message, transient = problem  # raised here, outside the handler: no chained original
        if recording is not None and recording.recording:
            await run_in_thread(
                partial(
                    recording.keep_tool_failure,
                    tool_.name,
                    args,
                    message,
                    transient=transient,
                    secrets=secrets,
                )
            )
        raise (TransientToolFailed if transient else ToolFailed)(message)

    if not observed(config):  # no tracer or stream handler: no stand-in run needed
        return await work()
    if replaying:  # the trace says the call was served from a recording, not made
        config = {**config, "metadata": {**config.get("metadata", {}), REPLAYED_METADATA: True}}
    return await ToolRun.of(tool_, work).ainvoke(redact(args, secrets), config)


async def _replayed(
    recording: Recording, tool: str, args: dict[str, Any], secrets: list[str]
) -> Any:
    """Return a call's recorded output (or raise its recorded failure); mark its step replayed.

    A call with no recording is not marked: nothing was served.
    """
    try:
        given = await run_in_thread(partial(recording.replay_tool, tool, args, secrets=secrets))
    except RecordedToolFailure:
        mark_replayed()
        raise
    mark_replayed()  # the step's record says so (planexec.recording.replayed)
    return given


def describe_error(exc: BaseException) -> str:
    """Describe a failed call for a person (and a model) to read; not yet scrubbed."""
    if isinstance(exc, StepTimeout):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, UnstorableValueError):
        return f"the output cannot be stored: {exc}"
    if isinstance(exc, ValidationError):
        return "invalid arguments: " + "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
        )
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, ToolError) else text
