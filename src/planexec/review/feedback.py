"""Review decisions as LangSmith feedback: the one place a decision leaves for LangSmith.

When LangSmith traces a run (a :class:`~langchain_core.tracers.langchain.LangChainTracer`
among the node's callbacks), each verdict the approval and failure review nodes record becomes
feedback on the trace of the invocation that made it:

============================  ========================  =========================================
key                           value                     score
============================  ========================  =========================================
``planexec.approval``         ``approve``               1 (a reviewer's, or the policy's)
``planexec.approval``         ``edit``                  none: an edit is neither approval nor
                                                        refusal (the revision is in ``extra``)
``planexec.approval``         ``reject``, ``cancel``    0
``planexec.step_failure``     ``retry``, ``edit``,      1: the reviewer kept the run going
                              ``skip``, ``replan``
``planexec.step_failure``     ``cancel``                0: the reviewer ended the run
============================  ========================  =========================================

The comment is the decision's text (reject feedback, cancel reason, replan hint); ``extra``
holds what the decision was about and who made it (:class:`FeedbackExtra`). A refused answer
and one given after its request expired are not verdicts: they send nothing. Every text sent
is scrubbed of secrets.

The feedback goes on the trace's root run (``run_id == trace_id``): LangSmith's trace table,
filters and monitoring charts read root runs' feedback; the node's own run is named in
``extra["node_run_id"]``. It is sent with the tracer's own client (same endpoint, key and
project), with ``trace_id``, so the client queues it with the runs and sends it from its
background ingest. No request is ever made on the node (a slow or unreachable endpoint never
holds up a run): the feedback is queued there only when the client already knows the server
batches feedback (LangSmith 0.8.10 or later, in the ``/info`` it asked for when it started
sending runs); otherwise (an older server, no answer yet, or none) everything is sent from a
thread of its own: the ``/info`` question, a ``POST /feedback``, and, for a deployment that
finds runs only within their project (SmithDB), the project's id (asked once per process).
Nothing here ever fails a run: an error is logged and dropped. No tracer, or tracing turned
off around the graph (``tracing_context(enabled=False)``), sends nothing.
"""

from __future__ import annotations

import logging
import threading
import uuid
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any, Literal, NotRequired, TypedDict

from langchain_core.runnables import RunnableConfig
from langchain_core.tracers.langchain import LangChainTracer
from langchain_core.tracers.schemas import Run
from langsmith import Client
from langsmith.utils import LangSmithWarning, is_version_greater_or_equal

from planexec.redaction.secrets import redact, scrub_text
from planexec.state import Decision, EditedRevision, Identity

log = logging.getLogger(__name__)

APPROVAL_KEY = "planexec.approval"
"""The feedback key of a plan's review decision."""
STEP_FAILURE_KEY = "planexec.step_failure"
"""The feedback key of an answer to a failed step."""
NOT_VERDICTS = frozenset({"refused", "expired"})
"""Decisions that send no feedback: the answer was not taken."""
SCORES: dict[tuple[str, str], int] = {
    ("plan", "approve"): 1,
    ("plan", "reject"): 0,
    ("plan", "cancel"): 0,
    ("step_failure", "retry"): 1,
    ("step_failure", "edit"): 1,
    ("step_failure", "skip"): 1,
    ("step_failure", "replan"): 1,
    ("step_failure", "cancel"): 0,
}
"""Each decision's score by (kind, action); a decision not here (a plan's edit) has none."""
BATCHED_SINCE = "0.8.10"
"""The LangSmith version from which feedback travels in the client's background batches."""
_IDS = uuid.UUID("6f1d3c52-8a4e-4f0b-9b57-2f64c8d1e0a3")
"""The namespace of feedback ids: one id per node run, so a decision is sent once."""

_PROJECT_IDS: dict[tuple[str, str], uuid.UUID] = {}
"""Project ids by (endpoint, project name), for deployments that need them (:func:`_project_id`)."""
_PROJECT_IDS_LOCK = threading.Lock()

# The trace's project id is not known without a request of its own (the tracer names its
# project): LangSmith finds the trace by its id, and a deployment that cannot refuses the
# feedback, which is then sent again with the project's id. LangSmith's warning that feedback
# without a project id is deprecated, raised at our call, is not the operator's concern.
warnings.filterwarnings(
    "ignore",
    message="Creating feedback for a run without session_id",
    category=LangSmithWarning,
    module=__name__.replace(".", r"\."),
)


class FeedbackExtra(TypedDict):
    """What a decision's feedback carries in ``extra``: what it was about, and who decided."""

    kind: Literal["plan", "step_failure"]
    action: str
    version: int | None
    digest: str | None
    thread_id: str | None
    by: Identity
    """Who decided (``source: "policy"`` for the approval policy's own approvals)."""
    at: str | None
    node_run_id: str
    """The approval or failure review node's run, in the trace the feedback is on."""
    step: NotRequired[int]
    """The failed step (``planexec.step_failure`` only)."""
    edited: NotRequired[EditedRevision]
    """The revision an edit made."""


def send_feedback(decision: Decision, config: RunnableConfig) -> None:
    """Send ``decision`` as LangSmith feedback on the trace of the node run of ``config``.

    Called by the approval and failure review nodes with each decision they record, after the
    answer was read (code a resume runs once per answer). Never raises.
    """
    action = decision.get("action", "")
    if action in NOT_VERDICTS or not action:
        return
    try:
        found = _traced_run(config)
        if found is None:
            return
        tracer, node_run = found
        _send(tracer, node_run, decision, config)
    except Exception as exc:  # feedback never fails a run
        _dropped(exc)


def _dropped(exc: Exception) -> None:
    """Log feedback that could not be sent: one line, its traceback at debug level."""
    log.warning("could not send the decision to LangSmith as feedback: %s", type(exc).__name__)
    log.debug("the feedback's error", exc_info=exc)


def _traced_run(config: RunnableConfig) -> tuple[LangChainTracer, Run] | None:
    """Return the LangSmith tracer among the node's callbacks and the node's run, if traced."""
    callbacks = config.get("callbacks")
    parent = getattr(callbacks, "parent_run_id", None)
    if parent is None:
        return None
    handlers = getattr(callbacks, "handlers", None) or []
    tracer = next((h for h in handlers if isinstance(h, LangChainTracer)), None)
    if tracer is None:
        return None
    run = tracer.run_map.get(str(parent))
    if run is None or run.extra.get("__disabled"):  # tracing_context(enabled=False)
        return None
    return tracer, run


def _send(
    tracer: LangChainTracer, node_run: Run, decision: Decision, config: RunnableConfig
) -> None:
    kind = decision.get("kind", "plan")
    action = decision.get("action", "")
    trace_id = node_run.trace_id or node_run.id
    root = tracer.run_map.get(str(trace_id))
    feedback = decision.get("feedback")
    fields: dict[str, Any] = {
        "trace_id": trace_id,
        "key": STEP_FAILURE_KEY if kind == "step_failure" else APPROVAL_KEY,
        "score": SCORES.get((kind, action)),
        "value": action,
        "comment": scrub_text(feedback) if feedback else None,
        "extra": dict(_extra(decision, config, node_run)),
        "feedback_id": uuid.uuid5(_IDS, str(node_run.id)),
        "start_time": root.start_time if root is not None else None,
        "stop_after_attempt": 1,
    }
    if node_run.address is not None:  # the trace went to an agent address, not a project
        fields["address"] = node_run.address
    elif node_run.session_id is not None:
        fields["session_id"] = node_run.session_id
    project = node_run.session_name or tracer.project_name
    send = partial(_deliver, tracer.client, fields, project)
    if _batches(tracer.client):  # queued: sent with the runs, in the background
        send(on_node=True)
    else:  # a request of its own, or the server not known yet: never on the node
        _in_background(partial(send, on_node=False))


def _deliver(client: Client, fields: dict[str, Any], project: str | None, *, on_node: bool) -> None:
    """Give the feedback to ``client``; ``on_node``: only where that makes no request here."""
    try:
        client.create_feedback(**fields)
    except ValueError:  # a deployment that finds runs only within their project (SmithDB)
        if not project or "address" in fields or "session_id" in fields:
            raise
        known = _known_project_id(client, project)
        if known is None and on_node:  # asking for it is a request: not on the node
            _in_background(partial(_deliver, client, fields, project, on_node=False))
            return
        session = known if known is not None else _project_id(client, project)
        client.create_feedback(**fields, session_id=session)


def _batches(client: Client) -> bool:
    """Tell whether ``client`` is known to send feedback with a trace id in its batches.

    It is when the server said it is LangSmith 0.8.10 or later taking multipart batches, in
    the ``/info`` the client has already asked for (it does when it starts sending runs), and
    the client sends runs from a background queue (as :meth:`Client.create_feedback` decides).
    Never asks itself: when the answer is not there yet, this says no and the feedback goes
    from a thread of its own.
    """
    info = getattr(client, "_info", None)  # what it knows, without asking (``client.info`` asks)
    version = getattr(info, "version", None)
    multipart = (getattr(info, "batch_ingest_config", None) or {}).get(
        "use_multipart_endpoint", True
    )
    queued = client.tracing_queue is not None or client.compressed_traces is not None
    return (
        bool(version)
        and is_version_greater_or_equal(str(version), BATCHED_SINCE)
        and bool(multipart)
        and not getattr(client, "_multipart_disabled", False)
        and queued
        and getattr(client, "otel_exporter", None) is None
    )


def _in_background(send: Callable[[], object]) -> None:
    """Make a feedback request on a thread of its own, so the node does not wait on it.

    Not a daemon: a process that ends right after a decision still sends it (one attempt).
    """

    def run() -> None:
        try:
            send()
        except Exception as exc:
            _dropped(exc)

    threading.Thread(target=run, name="planexec-feedback").start()


def _known_project_id(client: Client, project: str) -> uuid.UUID | None:
    """Return the id of the project named ``project`` if it was asked for already."""
    with _PROJECT_IDS_LOCK:
        return _PROJECT_IDS.get((client.api_url, project))


def _project_id(client: Client, project: str) -> uuid.UUID:
    """Return the id of the project named ``project``: asked once per process and endpoint."""
    known = _known_project_id(client, project)
    if known is None:
        known = client.read_project(project_name=project).id
        with _PROJECT_IDS_LOCK:
            _PROJECT_IDS[(client.api_url, project)] = known
    return known


def _extra(decision: Decision, config: RunnableConfig, node_run: Run) -> FeedbackExtra:
    by = decision.get("by") or Identity(id=None, source="unknown")
    thread = (config.get("configurable") or {}).get("thread_id")
    extra = FeedbackExtra(
        kind=decision.get("kind", "plan"),
        action=decision.get("action", ""),
        version=decision.get("version"),
        digest=decision.get("digest"),
        thread_id=str(thread) if thread is not None else None,
        by=Identity(id=scrub_text(by["id"]) if by["id"] else None, source=by["source"]),
        at=decision.get("at"),
        node_run_id=str(node_run.id),
    )
    if "step" in decision:
        extra["step"] = decision["step"]
    if "edited" in decision:
        extra["edited"] = decision["edited"]
    scrubbed: FeedbackExtra = redact(extra)
    return scrubbed
