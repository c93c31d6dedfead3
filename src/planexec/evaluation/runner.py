"""Run a dataset's examples through ``langsmith.aevaluate``: offline, or uploaded as an experiment.

Offline (the default) the examples go to ``aevaluate(..., upload_results=False)`` with a
client that reaches no server: no tracing thread, no ``/info`` request, nothing sent. With
``upload`` the environment's LangSmith client (``LANGSMITH_API_KEY``, ``LANGSMITH_ENDPOINT``)
records an experiment on the dataset the examples came from.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import sys
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langsmith import Client, aevaluate
from langsmith.schemas import Example, LangSmithInfo

from planexec.evaluation.dataset import EvalExample
from planexec.evaluation.evaluators import DEFAULT_EVALUATORS, Evaluator
from planexec.evaluation.outputs import EvalScore, TargetOutputs
from planexec.evaluation.target import EvalTarget

OFFLINE_URL = "http://127.0.0.1:9"
"""Where the offline client points (it never sends: no batch tracing, no info request)."""


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
    """Return an example as ``langsmith.evaluate`` takes it (plain dicts fail in 0.15)."""
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
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None


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

    ``upload``: record an experiment in LangSmith with ``client`` (default: the environment's).
    """
    by_id = {str(langsmith_example(e).id): e for e in examples}
    data = [langsmith_example(e) for e in examples]
    chosen = client if client is not None else (Client() if upload else offline_client())
    with _quiet(upload):
        run: Any = target.arun  # langsmith types a target as taking and giving plain dicts
        scorers: list[Any] = list(evaluators)
        results = await aevaluate(
            run,
            data=data,
            evaluators=scorers,
            max_concurrency=max_concurrency,
            client=chosen,
            upload_results=upload,
            experiment_prefix=experiment_prefix,
            metadata={"planexec_options": {k: str(v) for k, v in target.options.items()}},
        )
        rows = [row async for row in results]
    found: dict[str, ExampleResult] = {}
    for row in rows:
        example = by_id[str(row["example"].id)]
        outputs = _outputs(row["run"].outputs if row["run"] is not None else None)
        scores = {r.key: _as_score(r) for r in row["evaluation_results"]["results"]}
        found[example.id] = ExampleResult(example, outputs, scores)
    return [found[e.id] for e in examples if e.id in found]


def _outputs(outputs: Mapping[str, Any] | None) -> TargetOutputs:
    if outputs is None or "status" not in outputs:
        return TargetOutputs(
            thread_id="", status="error", answer="", planned_tools=[], trajectory=[],
            plan_valid_first_time=None, steps_run=0, model_calls=0, tokens=0, cost=0.0,
            wall_seconds=0.0, step_outputs={}, failed_steps=[],
            error="the target returned nothing",
        )  # fmt: skip
    return outputs  # type: ignore[return-value]  # the target's own TargetOutputs


def _as_score(result: Any) -> EvalScore:
    score = result.score
    return EvalScore(
        key=str(result.key),
        score=None if score is None else int(bool(score)),
        comment=str(result.comment or ""),
    )


@contextlib.contextmanager
def _quiet(upload: bool) -> Iterator[None]:
    """Keep langsmith's lines off stdout, which may carry --json, and its beta warning off.

    Uploading, its lines (the experiment's name) go to stderr; offline, nowhere.
    """
    said = sys.stderr if upload else io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(said):
        warnings.filterwarnings("ignore", message=".*upload_runs.*")
        yield
