"""Plan memory in a LangGraph store: approved plans kept as templates, found again by task.

Templates live in the store ``build_graph(store=...)`` was given (on LangGraph Server, the
platform's), under :data:`NAMESPACE`, one per task shape: a new run of the same shape replaces
the older template. What is stored is scrubbed of secrets, and small: the task, its pattern and
keywords, and the plan with its parameters as placeholders (no step outputs).
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.store.base import BaseStore
from typing_extensions import TypedDict

from planexec.memory import templates as t
from planexec.redaction.secrets import redact

NAMESPACE = ("planexec", "plans")
MAX_TEMPLATES_SCANNED = 200
"""Templates a lookup reads (the most recent first)."""
MAX_SHAPED_TASK_CHARS = 500
"""Longest task matched against templates' patterns (a bound on regex work); longer tasks are
still matched by keywords."""


class Template(TypedDict):
    """A stored plan template (the store item's value)."""

    task: str
    pattern: str
    params: list[str]
    keywords: list[str]
    plan: dict[str, Any]
    run: str
    saved_at: float


@dataclass(frozen=True)
class Recalled:
    """A template found for a task: ``how`` it fits, and the plan with the new values in it."""

    key: str
    template: Template
    how: Literal["same shape", "similar"]
    plan: dict[str, Any] | None
    """The template's plan filled with the new task's values (``same shape`` only)."""
    values: list[str] | None = None
    """The new task's values, in the template's parameters' order (``same shape`` only)."""


class PlanMemory:
    """List, read, save, find and delete plan templates in a LangGraph store."""

    def __init__(self, store: BaseStore) -> None:
        """Keep templates in ``store`` (any LangGraph store: in-memory, SQLite, PostgreSQL)."""
        self.store = store

    def remember(self, task: str, plan: dict[str, Any], run: str) -> str:
        """Save an approved plan that ran well as its task shape's template; return its key."""
        task, plan = redact(task), redact({"goal": plan["goal"], "steps": plan["steps"]})
        params = t.parameters(task, plan)
        shape = t.pattern(task, params)
        key = hashlib.sha256(shape.lower().encode()).hexdigest()[:16]
        template = Template(
            task=task,
            pattern=shape,
            params=params,
            keywords=t.keywords(task),
            plan=t.parametrized(plan, params),
            run=run,
            saved_at=time.time(),
        )
        self.store.put(NAMESPACE, key, dict(template), index=False)
        return key

    def recall(self, task: str) -> Recalled | None:
        """Return the best template for ``task``: one of the same shape, else a similar one."""
        words, best = t.keywords(task), None
        for key, template in self.items():
            try:
                found = (
                    re.fullmatch(template["pattern"], task.strip(), re.IGNORECASE)
                    if len(task) <= MAX_SHAPED_TASK_CHARS
                    else None
                )
            except (re.error, KeyError, TypeError):
                continue  # a damaged template is no template
            if found is not None:
                plan = t.filled(template["plan"], list(found.groups()))
                return Recalled(key, template, "same shape", plan, list(found.groups()))
            score = t.similarity(words, template.get("keywords") or [])
            if score >= t.MIN_SHARED_KEYWORDS and (best is None or score > best[0]):
                best = (score, Recalled(key, template, "similar", None))
        return best[1] if best else None

    def items(self) -> list[tuple[str, Template]]:
        """Return the templates, most recent first."""
        found = self.store.search(NAMESPACE, limit=MAX_TEMPLATES_SCANNED)
        rows = [(item.key, item.value) for item in found if isinstance(item.value, dict)]
        rows.sort(key=lambda row: -float(row[1].get("saved_at") or 0))
        return [(key, value) for key, value in rows]  # type: ignore[misc]

    def get(self, key: str) -> Template | None:
        """Return one template (None if there is none of that key)."""
        item = self.store.get(NAMESPACE, key)
        return item.value if item is not None else None  # type: ignore[return-value]

    def delete(self, key: str) -> bool:
        """Delete one template; say whether it was there."""
        if self.store.get(NAMESPACE, key) is None:
            return False
        self.store.delete(NAMESPACE, key)
        return True
