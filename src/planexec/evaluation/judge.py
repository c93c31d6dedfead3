"""The optional LLM judge: openevals' correctness judge reads each answer against the facts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from planexec.evaluation.dataset import Expectations
from planexec.evaluation.outputs import EvalScore

JudgeEvaluator = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], EvalScore]
"""An evaluator that reads the example's inputs too: ``(inputs, outputs, reference_outputs)``."""


def llm_judge(model: str | None = None) -> JudgeEvaluator:
    """Return the ``judge`` evaluator: ``model`` (default: the context's evaluator model) judges.

    It uses openevals' ``create_llm_as_judge`` with its ``CORRECTNESS_PROMPT``: the task as the
    inputs, the run's answer as the outputs, the example's facts as the reference. The model
    is loaded as planexec loads every model (scrubbed of secrets).
    """

    def judge(
        inputs: Mapping[str, Any], outputs: Mapping[str, Any], reference_outputs: Mapping[str, Any]
    ) -> EvalScore:
        from openevals.llm import create_llm_as_judge
        from openevals.prompts import CORRECTNESS_PROMPT

        from planexec.context import Context
        from planexec.llm.models import load_chat_model

        spec = model or Context().evaluator_model
        facts = Expectations.model_validate(dict(reference_outputs or {})).facts
        evaluator = create_llm_as_judge(
            prompt=CORRECTNESS_PROMPT, judge=load_chat_model(spec, role="judge"),
            feedback_key="judge",
        )  # fmt: skip
        result: Any = evaluator(
            inputs=str(inputs.get("task", "")),
            outputs=str(outputs.get("answer") or outputs.get("error") or ""),
            reference_outputs="\n".join(facts) or "(no reference: judge the answer alone)",
        )
        return EvalScore(
            key="judge", score=int(bool(result["score"])), comment=str(result.get("comment") or "")
        )

    return judge
