"""Evaluate a planner over a dataset: ``planexec eval DATASET``, and ``langsmith.evaluate``.

A dataset is JSONL (:func:`load_dataset`) or a LangSmith dataset (:func:`langsmith_dataset`);
:class:`EvalTarget` runs one example non-interactively; the evaluators
(:data:`DEFAULT_EVALUATORS`, :func:`llm_judge`) score its run; :func:`evaluate_examples` runs
them all through ``langsmith.aevaluate`` (offline unless uploading); :func:`totals` and
:func:`verdicts` make the report. Example, offline::

    from langsmith import evaluate
    from planexec.evaluation import DEFAULT_EVALUATORS, EvalTarget, langsmith_example, load_dataset

    examples = [langsmith_example(e) for e in load_dataset("examples/eval/sales.jsonl")]
    target = EvalTarget(options={"planner_model": "openai:gpt-4.1"})
    results = evaluate(target, data=examples, evaluators=list(DEFAULT_EVALUATORS),
                       upload_results=False)
"""

from planexec.evaluation.dataset import (
    DatasetError,
    EvalExample,
    Expectations,
    ExpectedCall,
    Inputs,
    Trajectory,
    langsmith_dataset,
    load_dataset,
)
from planexec.evaluation.evaluators import (
    DEFAULT_EVALUATORS,
    Evaluator,
    answer_facts,
    cost,
    final_status,
    model_calls,
    normalised,
    plan_valid_first_time,
    steps,
    tokens,
    trajectory,
    wall_time,
)
from planexec.evaluation.judge import JudgeEvaluator, llm_judge
from planexec.evaluation.outputs import EvalScore, ExecutedCall, FailedStep, TargetOutputs
from planexec.evaluation.report import (
    Threshold,
    ThresholdError,
    Totals,
    Verdict,
    parse_threshold,
    report_json,
    totals,
    verdicts,
)
from planexec.evaluation.runner import (
    ExampleResult,
    evaluate_examples,
    langsmith_example,
    offline_client,
)
from planexec.evaluation.target import EvalTarget

__all__ = [
    "DEFAULT_EVALUATORS",
    "DatasetError",
    "EvalExample",
    "EvalScore",
    "EvalTarget",
    "Evaluator",
    "ExampleResult",
    "ExecutedCall",
    "ExpectedCall",
    "FailedStep",
    "Expectations",
    "Inputs",
    "JudgeEvaluator",
    "TargetOutputs",
    "Threshold",
    "ThresholdError",
    "Totals",
    "Trajectory",
    "Verdict",
    "answer_facts",
    "cost",
    "evaluate_examples",
    "final_status",
    "langsmith_dataset",
    "langsmith_example",
    "llm_judge",
    "load_dataset",
    "model_calls",
    "normalised",
    "offline_client",
    "parse_threshold",
    "plan_valid_first_time",
    "report_json",
    "steps",
    "tokens",
    "totals",
    "trajectory",
    "verdicts",
    "wall_time",
]
