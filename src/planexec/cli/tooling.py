"""The tools a CLI run may use: the built-in ones, ``--tools MODULE:ATTR`` and ``--mcp FILE``.

``--tools`` adds Python tools to the built-in file and data tools (a name already taken is an
error, never a silent replacement): ``ATTR`` of ``MODULE`` is a
:class:`~planexec.tools.ToolRegistry`, a list (any iterable) of LangChain tools and plain
functions, or a function of no arguments returning one of those. ``MODULE`` is a dotted module
importable from the current folder (as ``python -m`` finds it) or the path of a ``.py`` file.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType

from langchain_core.tools import BaseTool

from planexec.cli.guard import UserError
from planexec.errors import ToolNameClashError
from planexec.tools import ToolRegistry, default_registry
from planexec.tools.registry import origin

ACCEPTED = (
    "ATTR must be a ToolRegistry, a list of tools (LangChain tools or plain functions), or a "
    "function of no arguments returning one"
)
"""What ``--tools MODULE:ATTR`` may name, as its errors say it."""


def load_tools(source: str) -> ToolRegistry:
    """Return the tools ``--tools MODULE:ATTR`` names, or raise UserError in one line."""
    module_name, sep, attr = source.rpartition(":")
    if not sep or not module_name.strip() or not attr.strip():
        raise UserError(f"--tools {source}: give MODULE:ATTR; {ACCEPTED}")
    module = _module(source, module_name)
    value: object = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise UserError(f"--tools {source}: module {module_name} has no attribute {attr!r}")
        value = getattr(value, part)
    if _is_factory(value):
        try:
            value = value()  # type: ignore[operator]
        except Exception as exc:  # the user's code: one line, what it raised
            raise UserError(f"--tools {source}: calling {attr}() failed: {_said(exc)}") from None
    if isinstance(value, BaseTool):
        value = [value]  # one LangChain tool is a list of one
    if not (isinstance(value, ToolRegistry) or _is_list(value)):
        raise UserError(f"--tools {source} is {_what(value)}: {ACCEPTED}")
    try:
        return ToolRegistry.of(value)
    except (TypeError, ValueError) as exc:
        raise UserError(f"--tools {source}: {exc}") from None


def add_tools(registry: ToolRegistry, source: str, tools: ToolRegistry) -> None:
    """Add ``tools`` (of ``--tools source``) to ``registry``; a name already taken is an error."""
    for tool_ in tools:
        try:
            registry.register(tool_)
        except ToolNameClashError:
            raise UserError(
                f"--tools {source}: its tool {tool_.name!r} ({origin(tool_)}) has the name of "
                f"{origin(registry.get(tool_.name))}; rename yours (--tools adds tools to the "
                "built-in ones and never replaces one)"
            ) from None


@contextlib.contextmanager
def run_tools(sources: Iterable[str], mcp: Path | None) -> Iterator[ToolRegistry | None]:
    """Yield the registry of a run's tools (None: the built-in ones alone).

    Every ``--tools`` source is loaded before any MCP server starts; the servers' sessions are
    closed when the command ends.
    """
    loaded = [(source, load_tools(source)) for source in sources]
    if not loaded and mcp is None:
        yield None
        return
    registry = default_registry()
    for source, tools in loaded:
        add_tools(registry, source, tools)
    if mcp is None:
        yield registry
        return
    from planexec.tools.mcp import shared_servers

    servers, shared = shared_servers(mcp)  # shared: the built-in tools and the servers'
    try:
        yield servers.registry(registry) if loaded else shared
    finally:
        servers.close()


def _module(source: str, name: str) -> ModuleType:
    """Import the module ``--tools`` names: a .py file's path, or a dotted name from the cwd."""
    if name.endswith(".py") or os.sep in name or "/" in name:
        return _module_of_file(source, Path(name))
    if "" not in sys.path and os.getcwd() not in sys.path:  # as `python -m` finds modules
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise UserError(
                f"--tools {source}: no module named {name!r} in the current folder or the "
                "installed packages"
            ) from None
        raise UserError(f"--tools {source}: importing {name} failed: {_said(exc)}") from None
    except Exception as exc:  # the module's own code failed (SyntaxError included)
        raise UserError(f"--tools {source}: importing {name} failed: {_said(exc)}") from None


def _module_of_file(source: str, path: Path) -> ModuleType:
    """Import a .py file as a module (its folder first on sys.path, as for a script)."""
    if not path.is_file():
        raise UserError(f"--tools {source}: no file {path}")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = f"planexec_tools_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"--tools {source}: {path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise UserError(f"--tools {source}: importing {path} failed: {_said(exc)}") from None
    return module


def _is_factory(value: object) -> bool:
    """Say whether ``value`` is a function to call for the tools (it takes no argument)."""
    if not (inspect.isfunction(value) or inspect.ismethod(value)):
        return False
    parameters = inspect.signature(value).parameters.values()
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters
    )


def _is_list(value: object) -> bool:
    """Say whether ``value`` is an iterable that may hold tools (not text, not a mapping)."""
    return isinstance(value, Iterable) and not isinstance(value, str | bytes | dict | type)


def _what(value: object) -> str:
    """Name what a value is, in a few words."""
    if inspect.isfunction(value):
        return f"a function with arguments ({value.__name__}; to add it as a tool, list it)"
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:39] + "…"
    return f"{shown} (of type {type(value).__name__})"


def _said(exc: BaseException) -> str:
    """Return an exception in one line: its type and first line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
