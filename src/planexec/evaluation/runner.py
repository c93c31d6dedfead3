"""Run a dataset's examples through ``langsmith.aevaluate``: offline, or uploaded as an experiment.

Offline (the default) the examples go to ``aevaluate(..., upload_results=False)`` with a
client that reaches no server: no tracing thread, no ``/info`` request, nothing sent. With
``upload`` the environment's LangSmith client (``LANGSMITH_API_KEY``, ``LANGSMITH_ENDPOINT``)
records an experiment on the dataset the examples came from; LangSmith refusing it (a key that
cannot write, a malformed reply, no connection) is one :class:`UploadError`.

Every example gets a row: an evaluator that raised scores 0 (``evaluator error: ...``), and an
example langsmith gave no result for is an ``error`` row, never left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import sys
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langsmith import Client, aevaluate
from langsmith.schemas import Example, LangSmithInfo
from langsmith.utils import LangSmithError
from pydantic import ValidationError

from planexec.errors import PlanexecError
from planexec.evaluation.dataset import EvalExample
from planexec.evaluation.evaluators import DEFAULT_EVALUATORS, Evaluator, final_status
from planexec.evaluation.outputs import EvalScore, TargetOutputs
from planexec.evaluation.target import EvalTarget, one_line

OFFLINE_URL = "http://127.0.0.1:9"
"""Where the offline client points (it never sends: no batch tracing, no info request)."""
NO_RESULT = "langsmith gave no result for this example"
"""The error of an example ``aevaluate`` returned no row for."""


class UploadError(PlanexecError):
    """LangSmith refused or failed the experiment's upload: one line saying why."""


@dataclass(frozen=True)
class ExampleResult:
    """One example's outcome: the target's outputs and every evaluator's score."""

    example: EvalExample
    outputs: TargetOutputs
    scores: dict[str, EvalScore]

    @property
    def passed(self) -> bool:
        """Whether every evaluator that applies scored 1."""
        return all(s["score"] != 0 for s in self.scores.values())


def offline_client() -> Client:
    """Return a LangSmith client that makes no request (what ``aevaluate`` gets offline)."""
    return Client(
        api_url=OFFLINE_URL, api_key="offline", auto_batch_tracing=False, info=LangSmithInfo()
    )


def langsmith_example(example: EvalExample, dataset_id: uuid.UUID | None = None) -> Example:
    """Return an example as ``langsmith.evaluate`` takes it (plain dicts fail in 0.15).

    Its id is the example's id when that is a UUID written canonically (lower case, dashes,
    as LangSmith writes it), else a UUID made from the id, so distinct ids stay distinct.
    """
    ident = _uuid(example.id) or uuid.uuid5(uuid.NAMESPACE_URL, example.id)
    given = _uuid(example.metadata.get("langsmith_dataset_id"))
    return Example(
        id=ident,
        dataset_id=dataset_id or given or uuid.uuid5(uuid.NAMESPACE_URL, "planexec-eval"),
        inputs=example.inputs_dict(),
        outputs=example.outputs_dict(),
        metadata={"planexec_id": example.id},
        created_at=datetime.datetime.now(datetime.UTC),
    )


def _uuid(value: object) -> uuid.UUID | None:
    """Return ``value`` as a UUID when it is one written canonically, else None."""
    try:
        parsed = uuid.UUID(str(value)) if value else None
    except ValueError:
        return None
    return parsed if parsed is not None and str(parsed) == value else None


async def evaluate_examples(
    examples: Sequence[EvalExample],
    target: EvalTarget,
    evaluators: Sequence[Evaluator] = DEFAULT_EVALUATORS,
    *,
    max_concurrency: int = 4,
    upload: bool = False,
    client: Client | None = None,
    experiment_prefix: str = "planexec",
) -> list[ExampleResult]:
    """Run every example (at most ``max_concurrency`` at once) and score it; in dataset order.

    ``upload``: record an experiment in LangSmith with ``client`` (default: the environment's);
    raises :class:`UploadError` when LangSmith refuses it. Raises ``ValueError`` for a
    ``max_concurrency`` below 1. Wall time in the totals is the sum of the examples' times,
    not the evaluation's elapsed time (examples run concurrently).
    """
    if not isinstance(max_concurrency, int) or max_concurrency < 1:
        raise ValueError(
            f"max_concurrency: at least 1 (examples run at once), got {max_concurrency!r}"
        )
    by_id = {str(langsmith_example(e).id): e for e in examples}
    data = [langsmith_example(e) for e in examples]
    chosen = client if client is not None else (Client() if upload else offline_client())
    with _quiet():
        try:
            rows = await _rows(target, data, evaluators, max_concurrency, chosen, upload,
                               experiment_prefix)  # fmt: skip
            if upload:  # the runs and scores are sent before this returns, not at exit
                await asyncio.to_thread(chosen.flush)
        except (LangSmithError, ValidationError, OSError) as exc:  # requests' are OSErrors
            if not upload:
                raise
            raise UploadError(f"LangSmith did not take the experiment: {one_line(exc)}") from None
    found: dict[str, ExampleResult] = {}
    for row in rows:
        example = by_id[str(row["example"].id)]
        outputs = _outputs(row["run"].outputs if row["run"] is not None else None)
        scores = {r.key: as_score(r) for r in row["evaluation_results"]["results"]}
        found[example.id] = ExampleResult(example, outputs, scores)
    return [found.get(e.id) or _no_result(e) for e in examples]


async def _rows(
    target: EvalTarget,
    data: list[Example],
    evaluators: Sequence[Evaluator],
    max_concurrency: int,
    client: Client,
    upload: bool,
    experiment_prefix: str,
) -> list[Any]:
    run: Any = target.arun  # langsmith types a target as taking and giving plain dicts
    scorers: list[Any] = list(evaluators)
    results = await aevaluate(
        run,
        data=data,
        evaluators=scorers,
        max_concurrency=max_concurrency,
        client=client,
        upload_results=upload,
        experiment_prefix=experiment_prefix,
        metadata={"planexec_options": {k: str(v) for k, v in target.options.items()}},
    )
    return [row async for row in results]


def _no_result(example: EvalExample) -> ExampleResult:
    """Return the row of an example ``aevaluate`` gave no result for: an error, failed."""
    outputs = _outputs(None, NO_RESULT)
    score = final_status(outputs, example.outputs_dict())
    return ExampleResult(example, outputs, {score["key"]: score})


def _outputs(
    outputs: Mapping[str, Any] | None, why: str = "the target returned nothing"
) -> TargetOutputs:
    if outputs is None or "status" not in outputs:
        return TargetOutputs(
            thread_id="", status="error", answer="", planned_tools=[], trajectory=[],
            plan_valid_first_time=None, steps_run=0, model_calls=0, tokens=0, cost=0.0,
            wall_seconds=0.0, step_outputs={}, failed_steps=[], error=why,
        )  # fmt: skip
    return outputs  # type: ignore[return-value]  # the target's own TargetOutputs


def as_score(result: Any) -> EvalScore:
    """Return a langsmith ``EvaluationResult`` as a score; an evaluator that raised scores 0.

    langsmith records a raising evaluator as score None with ``extra={"error": True}`` and
    the exception in the comment: that is a failure (``evaluator error: <one line>``), never
    "not asked".
    """
    if (result.extra or {}).get("error"):
        said = (str(result.comment or "").strip().splitlines() or ["it raised"])[0]
        return EvalScore(key=str(result.key), score=0, comment=f"evaluator error: {said[:300]}")
    score = result.score
    return EvalScore(
        key=str(result.key),
        score=None if score is None else int(bool(score)),
        comment=str(result.comment or ""),
    )


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Send what is printed while the examples run to stderr, and keep langsmith's beta warning off.

    stdout may carry ``--json``: langsmith's lines (an uploaded experiment's name) and what
    tools print go to stderr.
    """
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.filterwarnings("ignore", message=".*upload_runs.*")
        yield
