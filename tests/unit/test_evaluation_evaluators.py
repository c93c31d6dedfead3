"""The evaluators score a run's outputs against an example's expectations; thresholds gate CI."""

from __future__ import annotations

from typing import Any

import pytest

from planexec.evaluation import (
    DEFAULT_EVALUATORS,
    ThresholdError,
    answer_facts,
    final_status,
    model_calls,
    normalised,
    parse_threshold,
    plan_valid_first_time,
    trajectory,
    verdicts,
    wall_time,
)


def ran(*calls: tuple[str, dict[str, Any]], planned: list[str] | None = None) -> dict[str, Any]:
    return {
        "trajectory": [
            {"step": i, "tool": tool, "args": args, "status": "succeeded"}
            for i, (tool, args) in enumerate(calls, start=1)
        ],
        "planned_tools": planned if planned is not None else [tool for tool, _ in calls],
        "status": "succeeded",
        "answer": "",
        "model_calls": 3,
        "wall_seconds": 2.5,
        "plan_valid_first_time": True,
    }


RAN = ran(("load_csv", {"path": "sales.csv"}), ("calculate_stats", {"value_column": "revenue"}),
          ("generate_chart", {"kind": "line"}))  # fmt: skip


@pytest.mark.parametrize(
    ("expected", "score"),
    [
        ({"tools": ["load_csv", "calculate_stats", "generate_chart"]}, 1),
        ({"tools": ["calculate_stats", "load_csv", "generate_chart"]}, 0),
        (
            {
                "trajectory": {
                    "steps": ["generate_chart", "load_csv", "calculate_stats"],
                    "match": "unordered",
                }
            },
            1,
        ),
        ({"trajectory": {"steps": ["generate_chart", "load_csv", "calculate_stats"]}}, 0),
        ({"trajectory": {"steps": ["load_csv"], "match": "superset"}}, 1),
        ({"trajectory": {"steps": ["load_csv"], "match": "subset"}}, 0),
        (
            {
                "trajectory": {
                    "steps": ["load_csv", "calculate_stats", "generate_chart", "write_report"],
                    "match": "subset",
                }
            },
            1,
        ),
        (
            {
                "trajectory": {
                    "steps": [{"tool": "generate_chart", "args": {"kind": "line"}}],
                    "match": "superset",
                }
            },
            1,
        ),
        (
            {
                "trajectory": {
                    "steps": [{"tool": "generate_chart", "args": {"kind": "bar"}}],
                    "match": "superset",
                }
            },
            0,
        ),
        ({}, None),
    ],
)
def test_trajectory_modes_and_arguments(expected: dict[str, Any], score: int | None) -> None:
    result = trajectory(RAN, expected)
    assert result["key"] == "trajectory"
    assert result["score"] == score, result["comment"]


def test_tools_are_the_planned_names_not_the_order_they_ran_in() -> None:
    parallel = ran(("load_csv", {}), ("b", {}), ("a", {}), planned=["load_csv", "a", "b"])
    assert trajectory(parallel, {"tools": ["load_csv", "a", "b"]})["score"] == 1


@pytest.mark.parametrize(
    ("answer", "fact", "found"),
    [
        ("Total revenue: 897325.0 USD", "897,325", True),
        ("Total revenue: 897,325.00", "897325", True),
        ("TOTAL\n  revenue", "total revenue", True),
        ("values 1,2,3", "123", False),
        ("rose 25.5%", "25.50%", True),
        ("rose 25.5%", "25%", False),
        ("897325", "89732", False),  # whole numbers and words only
        ("an update", "up", False),
    ],
)
def test_facts_match_whatever_the_case_spacing_and_number_format(
    answer: str, fact: str, found: bool
) -> None:
    assert normalised(answer) == " ".join(normalised(answer).split())
    result = answer_facts({"answer": answer}, {"facts": [fact]})
    assert result["score"] == int(found)


def test_missing_facts_are_named() -> None:
    result = answer_facts({"answer": "up"}, {"facts": ["up", "down", "flat"]})
    assert result["score"] == 0
    assert result["comment"] == "2 of 3 missing: 'down'; 'flat'"


def test_status_defaults_to_succeeded_and_says_why_not() -> None:
    assert final_status({"status": "succeeded"}, {})["score"] == 1
    failed = {"status": "partial", "failed_steps": [{"step": 2, "tool": "x", "status": "failed",
                                                     "error": "boom"}]}  # fmt: skip
    result = final_status(failed, {})
    assert result["score"] == 0
    assert result["comment"] == "partial, expected succeeded (step 2 [x] failed: boom)"
    assert final_status(failed, {"status": "partial"})["score"] == 1


def test_limits_are_checked_only_when_given() -> None:
    assert model_calls(RAN, {})["score"] is None
    assert model_calls(RAN, {"max_model_calls": 3})["score"] == 1
    assert model_calls(RAN, {"max_model_calls": 2})["comment"] == "3 of at most 2"
    assert wall_time(RAN, {"max_seconds": 1})["score"] == 0
    assert plan_valid_first_time({"plan_valid_first_time": None}, {})["score"] is None


def test_every_evaluator_gives_its_key() -> None:
    keys = [e(RAN, {})["key"] for e in DEFAULT_EVALUATORS]
    assert keys == [e.__name__ for e in DEFAULT_EVALUATORS]


@pytest.mark.parametrize(
    "text", ["pass_rate", "pass_rate=", "pass_rate=high", "speed=1", "pass_rate=nan", "=1"]
)
def test_a_wrong_threshold_says_what_is_accepted(text: str) -> None:
    with pytest.raises(ThresholdError, match=f"--min {text}: write NAME=NUMBER"):
        parse_threshold("min", text, ["trajectory"])


def test_thresholds_are_checked_against_the_totals() -> None:
    figures: Any = {"pass_rate": 0.5, "means": {"trajectory": 1.0}, "tokens": 100}
    checked = verdicts(
        figures,
        [
            parse_threshold("min", "pass_rate=0.9", []),
            parse_threshold("min", "trajectory=1", ["trajectory"]),
            parse_threshold("min", "answer_facts=1", ["answer_facts"]),
            parse_threshold("max", "tokens=50", []),
        ],
    )
    assert [v["met"] for v in checked] == [False, True, False, False]
    assert checked[2]["value"] is None  # no example asked for facts: not met


def test_the_llm_judge_reads_the_answer_against_the_facts(tmp_path) -> None:
    import json

    from planexec.evaluation import llm_judge

    script = tmp_path / "judge.json"
    verdict = {"reasoning": "The answer gives the total.", "score": True}
    script.write_text(
        json.dumps({"replies": [{"tool_calls": [{"name": "score", "args": verdict}]}]})
    )
    judge = llm_judge(f"scripted:{script}")
    result = judge({"task": "Total sales"}, {"answer": "897325"}, {"facts": ["897,325"]})
    assert result == {"key": "judge", "score": 1, "comment": "The answer gives the total."}


def test_examples_are_planned_afresh_unless_memory_is_asked(tmp_path) -> None:
    from planexec.evaluation import EvalTarget

    inputs = {"task": "t", "context": {"max_steps": 4}}
    target = EvalTarget(options={"max_steps": None, "max_replans": 0}, workspace_root=tmp_path)
    context = target.context_of(inputs)
    assert context.plan_memory is False and context.max_steps == 4 and context.max_replans == 0
    assert EvalTarget(memory=True, workspace_root=tmp_path).context_of(inputs).plan_memory


@pytest.mark.parametrize(
    ("fact", "answer", "found"),
    [
        ("897,325", "total 897,325.75", False),  # a whole number is not a prefix of a decimal
        ("897325", "total -897325", False),
        ("5", "change -5", False),
        ("3", "version 3.5", False),
        ("0.5", "rate 0.55", False),
        ("0", "-0", False),
        ("-5", "change 5", False),
        ("-5", "change \u22125", True),  # U+2212, what many formatters print
        ("-5", "change -5.0", True),
        ("12%", "grew 12 %", True),
        ("0.5", "ratio .5", True),
        ("café", "cafe\u0301 sales", True),  # NFD
        ("\ufb01sh", "fish", True),  # a ligature (NFKC)
        ("1,000,000", "1000000.000", True),
        ("1.50", "price 1.5", True),
        ("5", "3-5 items", True),  # a range, not a negative number
        ("2024", "from 2023-2024", True),
        ("7", "the values 3,5,7", True),  # a list of numbers
        ("-5", "10-5", False),  # a subtraction, not minus five
        ("5", "at 10:05", False),  # a leading zero is kept: not the number 5
    ],
)
def test_facts_match_whole_numbers_only(fact: str, answer: str, found: bool) -> None:
    result = answer_facts({"answer": answer}, {"facts": [fact]})
    assert result["score"] == int(found), result["comment"]


PREVIEWED = {
    "answer": "Step 3 (Total revenue by product): 12 rows (the whole output: planexec show "
    "t-1 --output 3)",
    "step_outputs": {"3": [{"product": "Widget", "revenue": 1200.5}], "2": {"x": "hidden"}},
}


def test_facts_are_looked_for_in_the_whole_output_of_a_step_the_answer_cuts_short() -> None:
    found = answer_facts(PREVIEWED, {"facts": ["12 rows", '"revenue": 1200.5']})
    assert found["score"] == 1, found["comment"]
    assert "step 3" in found["comment"]
    missed = answer_facts(PREVIEWED, {"facts": ["hidden"]})  # step 2 is not previewed
    assert missed["score"] == 0
    assert "step 3's whole output" in missed["comment"]


@pytest.mark.parametrize("mode", ["superset", "unordered"])
def test_expected_calls_with_arguments_are_matched_before_bare_ones(mode: str) -> None:
    executed = ran(("x", {"k": 1}), ("x", {"k": 2}))
    expected = {"trajectory": {"steps": ["x", {"tool": "x", "args": {"k": 1}}], "match": mode}}
    result = trajectory(executed, expected)
    assert result["score"] == 1, result["comment"]


def test_arguments_compare_with_their_types() -> None:
    executed = ran(("x", {"k": 1}))
    expected = {"trajectory": {"steps": [{"tool": "x", "args": {"k": True}}]}}
    result = trajectory(executed, expected)
    assert result["score"] == 0
    assert "k" in result["comment"] and "true" in result["comment"], result["comment"]
    same = {"trajectory": {"steps": [{"tool": "x", "args": {"k": 1.0}}]}}
    assert trajectory(executed, same)["score"] == 1  # 1 and 1.0 are the same JSON number


@pytest.mark.parametrize(
    ("bound", "text", "said"),
    [
        ("min", "tokens=5", "between 0 and 1"),  # the tokens evaluator's mean
        ("min", "pass_rate=2", "between 0 and 1"),
        ("min", "pass_rate=-1", "between 0 and 1"),
        ("min", "trajectory=1.5", "between 0 and 1"),
        ("max", "steps=-1", "at least 0"),
    ],
)
def test_a_threshold_that_is_always_or_never_met_is_refused(
    bound: Any, text: str, said: str
) -> None:
    with pytest.raises(ThresholdError, match=said) as caught:
        parse_threshold(bound, text, ["trajectory", "tokens"])
    assert ("mean" in str(caught.value)) == (bound == "min")
    assert ("total" in str(caught.value)) == (bound == "max")


def test_an_evaluator_that_raised_scores_0_and_the_example_fails() -> None:
    from langsmith.evaluation.evaluator import EvaluationResult

    from planexec.evaluation import ExampleResult
    from planexec.evaluation.runner import as_score

    crashed = EvaluationResult(
        key="judge", score=None, comment="ValueError('no OPENAI_API_KEY\\nmore')",
        extra={"error": True},
    )  # fmt: skip
    score = as_score(crashed)
    assert score["score"] == 0
    assert score["comment"].startswith("evaluator error: ") and "\n" not in score["comment"]
    result = ExampleResult(example=None, outputs={}, scores={"judge": score})  # type: ignore[arg-type]
    assert not result.passed


def test_percentages_never_round_up_to_100() -> None:
    from planexec.evaluation.report import percent

    assert percent(399 / 400) == "99.7%"
    assert percent(0.9999) == "99.9%"
    assert percent(1.0) == "100%"
    assert percent(0) == "0%"
