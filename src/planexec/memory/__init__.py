"""Plan memory: approved plans that ran well become templates that similar tasks reuse.

See :class:`PlanMemory` (list, inspect, delete templates) and :mod:`planexec.memory.templates`.
"""

from planexec.memory.store import NAMESPACE, PlanMemory, Recalled, Template

__all__ = ["NAMESPACE", "PlanMemory", "Recalled", "Template"]
