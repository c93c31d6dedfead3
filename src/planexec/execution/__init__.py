"""The execution layer: how the executor node runs the steps of an approved plan.

A step's journey, one module each, top to bottom:

* :mod:`~planexec.execution.round` what the steps of one executor run share, set by the node;
* :mod:`~planexec.execution.scheduling` a step waits for its dependencies;
* :mod:`~planexec.execution.tasks` the durable step task's body, and its futures in the node;
* :mod:`~planexec.execution.step` one step: references, attempts, its outcome;
* :mod:`~planexec.execution.retries` which failed attempts are tried again, and when;
* :mod:`~planexec.execution.calls` one tool call, scrubbed, its failure described;
* :mod:`~planexec.execution.model_step` a ``"tool": null`` step's model loop;
* :mod:`~planexec.execution.outcomes` what a step task returns, and the records made of it;
* :mod:`~planexec.execution.speculation` which steps may run before approval, whose results count.

Below it: :mod:`planexec.concurrency.toolcalls` (calls off the loop, time limits),
:mod:`planexec.storage.outputs`
(inline or spilled outputs), :mod:`planexec.plan.references` (``$N``), :mod:`planexec.plan.records`.
"""

from planexec.execution.outcomes import outcome, round_usage
from planexec.execution.round import ExecutionRound, event_writer, open_round, running
from planexec.execution.scheduling import DependencyGate
from planexec.execution.tasks import (
    StepFuture,
    all_ended,
    publisher,
    round_outcomes,
    run_step_async,
    run_step_blocking,
)

__all__ = [
    "DependencyGate",
    "ExecutionRound",
    "StepFuture",
    "StepOutcome",
    "all_ended",
    "event_writer",
    "open_round",
    "outcome",
    "publisher",
    "records_after",
    "round_outcomes",
    "round_usage",
    "run_step_async",
    "run_step_blocking",
    "running",
]
