"""The approval's estimate reads as English: one call, one step, one token are singular."""

from planexec.review.estimate import Estimate, estimate_lines


def lines_for(calls: int, tokens: int, chain: list[int], undeclared: int) -> list[str]:
    found = Estimate(
        spent={"calls": calls, "tokens": tokens, "cost": None},
        expected={"calls": (1, 1), "tokens": (1, 1), "cost": None},
        time={"chain": chain, "seconds": 2.0, "undeclared": undeclared},
        budgets={},
    )
    return estimate_lines(found)


def test_one_of_a_thing_is_singular():
    shown = "\n".join(lines_for(1, 1, [1], 1))
    assert "Expected for this plan: 1 model call, about 1 token, cost unknown" in shown
    assert "Spent so far: 1 model call, 1 token, cost unknown" in shown
    assert "Slowest chain: step 1 (no tool on it declares a typical time)." in shown


def test_several_are_plural():
    shown = "\n".join(lines_for(2, 5, [1, 2, 3], 1))
    assert "Spent so far: 2 model calls, 5 tokens" in shown
    assert "Slowest chain: steps 1 → 2 → 3, about 2.0 s plus 1 step of unknown time." in shown
