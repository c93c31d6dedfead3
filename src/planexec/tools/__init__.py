"""Tools: the registry, the workspace, and the built-in toolkits."""

from __future__ import annotations

from planexec.tools.registry import ToolRegistry
from planexec.tools.workspace import Workspace, current_workspace, use_workspace


def default_registry() -> ToolRegistry:
    """Return a registry with the file tools and the data-analysis toolkit."""
    from planexec.tools.data import DATA_TOOLS, SIDE_EFFECT_DATA_TOOLS
    from planexec.tools.files import FILE_TOOLS, SIDE_EFFECT_FILE_TOOLS

    registry = ToolRegistry()
    for item in [*FILE_TOOLS, *DATA_TOOLS]:
        registry.register(item, side_effects=False)
    for item in [*SIDE_EFFECT_FILE_TOOLS, *SIDE_EFFECT_DATA_TOOLS]:
        registry.register(item, side_effects=True)
    return registry


__all__ = ["ToolRegistry", "Workspace", "current_workspace", "default_registry", "use_workspace"]
