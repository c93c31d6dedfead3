"""Tools: the registry, the workspace, and the built-in toolkits."""

from __future__ import annotations

from planexec.tools.registry import ToolRegistry, ToolsLike
from planexec.tools.workspace import Workspace, current_workspace, use_workspace


def default_registry() -> ToolRegistry:
    """Return a registry with the file tools and the data-analysis toolkit."""
    from planexec.tools import data, files

    declared = {**files.FILE_FIELDS, **data.FILE_FIELDS}
    registry = ToolRegistry()
    for item in [*files.FILE_TOOLS, *data.DATA_TOOLS]:
        registry.register(  # they read the run's workspace only
            item, side_effects=False, open_world=False, file_fields=declared.get(item.name, ())
        )
    for item in [*files.SIDE_EFFECT_FILE_TOOLS, *data.SIDE_EFFECT_DATA_TOOLS]:
        registry.register(item, side_effects=True, file_fields=declared.get(item.name, ()))
    return registry


__all__ = [
    "ToolRegistry",
    "ToolsLike",
    "Workspace",
    "current_workspace",
    "default_registry",
    "use_workspace",
]
