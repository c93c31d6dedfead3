"""What the runs API hands back: a run's result, a thread's state, a row of the thread list."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from typing_extensions import TypedDict

from planexec.review.failure import FailureRequest
from planexec.review.request import ApprovalRequest
from planexec.state import Identity, PlanDoc

ReviewRequest = ApprovalRequest | FailureRequest
"""What a run asks a reviewer (an interrupt's payload): a plan to approve, or a failed step."""

Caller = Identity
"""Who drives the runs of a :class:`Runs` (``Runs(saver, caller=...)``): an identity.

The runs API puts it into the config of every run it starts or resumes, as
``config["configurable"]["planexec_caller"]``; the approval records it as who answered
(:mod:`planexec.review.identity`). The ``planexec`` command passes the local OS user:
``{"id": <the OS account's name, from pwd>, "source": "cli"}``. On a LangGraph server it is
never believed: the server's authenticated user is.
"""


class StepEvent(TypedDict, total=False):
    """A progress event a run streams (``stream_mode="custom"``), e.g. ``step_started``.

    ``plan_step`` events come from the planner and replanner while their model writes: the
    ``index``-th step as ``written`` (not yet validated), of attempt ``draft``, ``by`` a role.
    Under approval ``never`` a ``plan_step_started`` event (``by``, ``index``, ``step``) says
    that the ``index``-th written step starts now, as step ``step``, before the plan is whole.
    The runs API adds ``node_started``/``node_finished`` (``node``; ``failed``: the node raised,
    its work did not complete), ``plan_changed`` (``plan``, ``by`` the node that made it) and
    ``plan_approved`` (``by``: ``reviewer`` or ``policy``, once the approval accepted the plan;
    ``approver``: who approved it, as the approval recorded it in ``decisions``).

    Speculation (``Context.speculate``: read-only steps run while the plan is reviewed):
    ``speculation_started`` and ``speculation_ended`` (``steps``; ``answered``, ``stopped``),
    each such step's ``speculative_step_started``/``_finished``/``_failed``/``_skipped`` (as
    ``step_*``: its result is not approved yet), ``speculation_adopted`` (``steps`` the
    approved plan keeps, ``discarded`` the others) and ``speculation_discarded`` (``steps``:
    the plan was rejected or cancelled).
    """

    event: str
    step: int
    tool: str | None
    summary: str
    error: str
    reason: str
    attempt: int
    at: float
    by: str
    draft: int
    index: int
    written: dict[str, Any]
    node: str
    failed: bool
    plan: PlanDoc
    approver: Caller
    steps: list[int]
    discarded: list[int]
    answered: bool
    stopped: bool


OnEvent = Callable[[StepEvent], object]
"""Called with each step event while a run streams (e.g. to print progress)."""

Decide = Callable[[ReviewRequest], Mapping[str, Any]]
"""Answers an approval request, e.g. ``lambda request: {"action": "approve"}``."""


@dataclass(frozen=True)
class ThreadState:
    """A thread's latest checkpoint: its values, what runs next, and where its files are."""

    thread_id: str
    values: dict[str, Any]
    next: tuple[str, ...]
    created_at: str | None = None
    workspace: str | None = None
    outputs: str | None = None
    saved_context: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """Whether nothing is left to run (the run ended)."""
        return not self.next

    @property
    def status(self) -> str:
        """The final status, else ``waiting: NODE`` (or ``unknown`` when nothing is pending)."""
        final = self.values.get("final") or {}
        waiting = "waiting: " + ", ".join(self.next) if self.next else "unknown"
        return str(final.get("status") or waiting)


@dataclass(frozen=True)
class RunResult:
    """Where a run stopped: at its end, or at an approval nobody answered (``request``)."""

    thread_id: str
    workspace: str | None
    values: dict[str, Any]
    request: ReviewRequest | None = None

    @property
    def status(self) -> str:
        """``succeeded``, ``partial``, ``failed`` or ``cancelled``; ``unfinished`` if paused."""
        return str((self.values.get("final") or {}).get("status", "unfinished"))


class ThreadSummary(TypedDict):
    """One row of :meth:`Runs.threads`: a recent thread, its task and its status."""

    thread_id: str
    task: str
    status: str
    updated: str | datetime | None
