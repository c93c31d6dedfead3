"""Model calls and tokens per role, counted in one place: a callback handler on each call.

A node makes a :class:`UsageCounter` for its role, passes ``counter.config()`` to its model
calls, and returns ``{"usage": counter.usage()}``; the state's ``usage`` reducer
(:func:`planexec.state.add_usage`) sums the roles over the run. Each counted call is also
added to the run's budget, when one is spent in this context
(:func:`planexec.spending.budget.spending`),
so the steps of one round see each other's tokens at once.
"""

from __future__ import annotations

import threading
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.runnables.config import merge_configs

from planexec.spending.budget import current_budget
from planexec.state import RoleUsage, add_usage

MAX_TOKENS_PER_CALL = 2**40
"""Token counts a reply claims beyond this are not believed (they would overflow the sums)."""


def tokens(value: object) -> int:
    """Return a reply's token count as a plain int: 0 unless a sane non-negative integer."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return int(value) if 0 <= value <= MAX_TOKENS_PER_CALL else 0


def usage_of(role: str, message: BaseMessage | None) -> dict[str, RoleUsage]:
    """Count one model call and its tokens, for the state's ``usage`` reducer.

    The counts come from the endpoint: anything but a sane non-negative integer counts as 0.
    """
    meta = getattr(message, "usage_metadata", None)
    if not isinstance(meta, dict):
        meta = {}
    return {
        role: RoleUsage(
            calls=1,
            input_tokens=tokens(meta.get("input_tokens")),
            output_tokens=tokens(meta.get("output_tokens")),
        )
    }


# Not langchain_core's UsageMetadataCallbackHandler: it keys by model name, counts no calls
# and sums whatever counts a reply claims; planexec's state counts calls per role, bounded.
class UsageCounter(BaseCallbackHandler):
    """Counts the model calls made with its config, and their tokens, for one role.

    A call counts once it has replied (a failed call counts nothing), with the tokens its
    reply reports. Safe to share between threads and tasks.
    """

    run_inline = True  # count in the caller's thread, in order, also under async calls

    def __init__(self, role: str) -> None:
        """Count for ``role`` (``planner``, ``executor``, ``evaluator``, ``replanner``)."""
        super().__init__()
        self.role = role
        self._usage: dict[str, RoleUsage] = {}
        self._lock = threading.Lock()

    def config(self, config: RunnableConfig | None = None) -> RunnableConfig:
        """Return ``config`` (default: the current one) with this counter among its callbacks.

        The callbacks already there (tracers, LangGraph's streams) stay.
        """
        return merge_configs(ensure_config(config), {"callbacks": [self]})

    def usage(self) -> dict[str, RoleUsage]:
        """Return what was counted, as a ``usage`` state update (empty before any call)."""
        with self._lock:
            return dict(self._usage)

    def on_llm_end(
        self,
        response: LLMResult,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Count one finished call, with the tokens its (first) reply reports."""
        replies = response.generations[0] if response.generations else []
        message = replies[0].message if replies and isinstance(replies[0], ChatGeneration) else None
        counted = usage_of(self.role, message)
        with self._lock:
            self._usage = add_usage(self._usage, counted)
        budget = current_budget()
        if budget is not None:
            budget.add(self.role, counted[self.role])
