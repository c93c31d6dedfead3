"""Token cost of the planner's tool listing, with and without each tool's output shape.

The planner's system prompt lists every tool (name, description, side effects, argument
schema); a tool that declares its output adds ``returns``, its shape in one line, so a model
can write ``$N.field`` references that exist (issue 27). This prints the listing's tokens
(o200k_base if bpe-openai is installed, else 4 characters a token) for the built-in toolkit,
without and with ``returns``, the whole planner system prompt's, and the ratios, from one run.

    python bench/tool_listing.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planexec import default_registry
from planexec.llm import prompts
from tests.openai_server import count_tokens


def main() -> None:
    """Print the listing's tokens without and with output shapes."""
    tools = default_registry()
    with_returns = tools.describe()
    entries = json.loads(with_returns)
    without = json.dumps(
        [{k: v for k, v in e.items() if k != "returns"} for e in entries], indent=1
    )
    returns_only = sum(count_tokens(json.dumps(e.get("returns", ""))) for e in entries)
    before, after = count_tokens(without), count_tokens(with_returns)
    prompt_before = count_tokens(prompts.PLANNER_SYSTEM.format(max_steps=12, tools=without))
    prompt_after = count_tokens(prompts.PLANNER_SYSTEM.format(max_steps=12, tools=with_returns))
    print(f"Planner tool listing, built-in toolkit ({len(entries)} tools), tokens")
    print(f"{'':28}{'without returns':>16}{'with returns':>14}{'ratio':>8}")
    print(f"{'tool listing':28}{before:>16}{after:>14}{after / before:>8.2f}")
    print(
        f"{'planner system prompt':28}{prompt_before:>16}{prompt_after:>14}"
        f"{prompt_after / prompt_before:>8.2f}"
    )
    print(f"'returns' lines alone: {returns_only} tokens, {returns_only / len(entries):.0f} a tool")


if __name__ == "__main__":
    main()
