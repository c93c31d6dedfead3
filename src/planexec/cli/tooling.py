"""The tools a CLI run may use: the built-in ones, ``--tools MODULE:ATTR`` and ``--mcp FILE``.

``--tools`` adds Python tools to the built-in file and data tools (a name already taken is an
error, never a silent replacement): ``ATTR`` of ``MODULE`` is a
:class:`~planexec.tools.ToolRegistry`, a list (any iterable) of LangChain tools and plain
functions, or a function of no arguments whose return annotation says it returns one of those
(``-> list[BaseTool]``, ``-> ToolRegistry``; a container's item type written: _returns_tools).
No other function is ever called while loading, nor an annotation's text evaluated that could run
code: a plain function named alone is refused (it is most likely a tool, and calling it would run
it), and so is one annotated ``-> list`` or ``-> Iterator``.
``MODULE`` is a dotted module importable from the current folder (as ``python -m`` finds it) or
the path of a ``.py`` file. Whatever the user's code raises while it is imported, read or
called is one scrubbed line naming the source; an error message never shows what a value holds.
"""

from __future__ import annotations

import ast
import collections.abc as abc
import contextlib
import importlib
import importlib.util
import inspect
import itertools
import os
import sys
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from langchain_core.tools import BaseTool

from planexec.cli.guard import UserError
from planexec.errors import ToolNameClashError
from planexec.redaction.secrets import scrub_text
from planexec.tools import ToolRegistry, default_registry
from planexec.tools.registry import MAX_TOOLS, describe_value, origin

FACTORY_ANNOTATION = (
    "a function that returns tools must say so in its return annotation "
    "(-> list[BaseTool] or -> ToolRegistry)"
)
"""How a function tells ``--tools`` it is to be called for the tools (the one kind called)."""
ACCEPTED = (
    "ATTR must be a ToolRegistry, a list of tools (LangChain tools or plain functions), or a "
    "function of no arguments whose return annotation says it returns one "
    "(-> list[BaseTool] or -> ToolRegistry)"
)
"""What ``--tools MODULE:ATTR`` may name, as its errors say it."""
USER_CODE_ERRORS = (Exception, SystemExit)
"""What the user's module may raise while it is imported, read or called: one line each.
(A Ctrl-C, KeyboardInterrupt, stays the interruption it is.)"""
TOOL_CONTAINERS: frozenset[object] = frozenset(
    {
        list,
        tuple,
        set,
        frozenset,
        abc.Iterable,
        abc.Iterator,
        abc.Generator,
        abc.Collection,
        abc.Sequence,
        abc.MutableSequence,
        abc.Set,
    }
)
"""The containers a tools factory may say it returns, their item type written and naming tools:
``list[BaseTool]``, ``Iterator[Callable[..., str]]`` (a bare ``list`` says nothing of its items)."""
TYPING_NAMES: dict[str, object] = {
    "BaseTool": BaseTool,
    "ToolRegistry": ToolRegistry,
    "Any": Any,
    **{name: getattr(abc, name) for name in ("Callable", "Iterable", "Iterator", "Sequence")},
}
"""Names a tools factory's string annotation may use without defining them (imported only
``if TYPE_CHECKING``): tried when the module's own names do not resolve it."""
NAME_NODES = (
    ast.Expression,
    ast.Name,
    ast.Attribute,
    ast.Subscript,
    ast.Tuple,
    ast.List,
    ast.Load,
    ast.BitOr,
)
"""The nodes of an annotation's text that run no code (with ``|``, ``None`` and ``...``)."""
_MISSING = object()


def load_tools(source: str) -> ToolRegistry:
    """Return the tools ``--tools MODULE:ATTR`` names, or raise UserError in one line."""
    module_name, sep, attr = source.rpartition(":")
    if not sep or not module_name.strip() or not attr.strip():
        raise UserError(f"--tools {source}: give MODULE:ATTR; {ACCEPTED}")
    module = _module(source, module_name)
    try:
        tools = _read(source, module, module_name, attr)
    except UserError:
        raise
    except USER_CODE_ERRORS as exc:  # the user's code: one line, what it raised
        raise UserError(f"--tools {source}: reading {attr} failed: {_said(exc)}") from None
    try:
        return ToolRegistry.of(tools)  # more than MAX_TOOLS items: refused there
    except (TypeError, ValueError) as exc:  # planexec's errors are ValueErrors too
        raise UserError(f"--tools {source}: {scrub_text(str(exc))}") from None


def _read(source: str, module: ModuleType, module_name: str, attr: str) -> object:
    """Return what ``MODULE:ATTR`` names, as a registry or a list of (at most MAX_TOOLS+1) items.

    A function is called only when it is a tools factory (:func:`_called_factory`); whatever
    the attribute or its iteration raises propagates to :func:`load_tools`.
    """
    value: object = module
    for part in attr.split("."):
        value = getattr(value, part, _MISSING)
        if value is _MISSING:
            raise UserError(f"--tools {source}: module {module_name} has no attribute {attr!r}")
    if inspect.isfunction(value) or inspect.ismethod(value):
        value = _called_factory(source, attr, value)
    if isinstance(value, BaseTool):
        return [value]  # one LangChain tool is a list of one
    if isinstance(value, ToolRegistry):
        return value
    if not _is_list(value):
        raise UserError(f"--tools {source} is {_what(value)}: {ACCEPTED}")
    return list(itertools.islice(value, MAX_TOOLS + 1))


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
    except USER_CODE_ERRORS as exc:  # the module's own code failed (SyntaxError included)
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
    except USER_CODE_ERRORS as exc:
        sys.modules.pop(name, None)
        raise UserError(f"--tools {source}: importing {path} failed: {_said(exc)}") from None
    return module


def _called_factory(source: str, attr: str, function: Callable[..., Any]) -> object:
    """Call a tools factory and return what it made; refuse any other function uncalled.

    A factory takes no required argument and says in its return annotation that it returns
    a :class:`ToolRegistry` or a list (iterable) of tools. Any other function is most likely a
    tool itself: calling it to see what it returns would run it (delete, send, write).
    """
    name = getattr(function, "__name__", attr)
    parameters = inspect.signature(function).parameters.values()
    required = [
        p.name
        for p in parameters
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if required:
        raise UserError(
            f"--tools {source} is a function with arguments ({name}; to add it as a tool, list "
            f"it): put it in a list (TOOLS = [{name}]); a function that returns tools takes none"
        )
    try:
        hint = _return_hint(function)
    except USER_CODE_ERRORS as exc:  # a name the module never defines
        raise UserError(
            f"--tools {source} is a function: to add it as a tool put it in a list (TOOLS = "
            f"[{name}]); {FACTORY_ANNOTATION}, and its annotations cannot be resolved "
            f"({_said(exc)})"
        ) from None
    async_code = inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)
    if hint is _MISSING or async_code or not _returns_tools(hint):
        raise UserError(
            f"--tools {source} is a function: to add it as a tool put it in a list (TOOLS = "
            f"[{name}]); {FACTORY_ANNOTATION}"
        )
    try:
        return function()
    except USER_CODE_ERRORS as exc:
        raise UserError(f"--tools {source}: calling {attr}() failed: {_said(exc)}") from None


def _return_hint(function: Callable[..., Any]) -> object:
    """Return a function's resolved return annotation (``_MISSING`` when it has none).

    Only the return annotation is resolved, and only when every text in it is a type's name
    (:func:`_names_only`): resolving a text evaluates it, and an annotation such as
    ``-> "wipe() or list"`` would run code (it is ``_MISSING`` then, refused uncalled). It is
    resolved in the function's module; failing that (a name imported only
    ``if TYPE_CHECKING``), with the names of :data:`TYPING_NAMES` as well.
    """
    annotations = getattr(function, "__annotations__", {})
    if "return" not in annotations or not _names_only(annotations["return"]):
        return _MISSING
    returned = types.SimpleNamespace(__annotations__={"return": annotations["return"]})
    module_names = getattr(inspect.unwrap(function), "__globals__", {})
    try:
        return typing.get_type_hints(returned, globalns=module_names)["return"]
    except NameError:
        return typing.get_type_hints(returned, module_names, TYPING_NAMES)["return"]


def _names_only(annotation: object) -> bool:
    """Say whether every text in an annotation is a type expression that runs no code.

    Names, dotted names, subscripts (``list[BaseTool]``), ``|``, ``None`` and ``...`` only:
    no call, operator or comprehension, in the annotation's text or a text nested in it.
    """
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        try:
            tree = ast.parse(annotation, mode="eval")
        except SyntaxError:
            return False
        return all(_is_name_node(node) for node in ast.walk(tree))
    if isinstance(annotation, list | tuple):  # Callable[[int], str]'s argument list
        return all(_names_only(item) for item in annotation)
    return all(_names_only(arg) for arg in typing.get_args(annotation))


def _is_name_node(node: ast.AST) -> bool:
    """Say whether a node of an annotation's text is one a type expression is made of."""
    if isinstance(node, ast.Constant):
        value = node.value
        return value is None or value is Ellipsis or (isinstance(value, str) and _names_only(value))
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, ast.BitOr)
    return isinstance(node, NAME_NODES)


def _returns_tools(hint: object) -> bool:
    """Say whether a return annotation says it returns tools.

    That is a :class:`ToolRegistry` (or a subclass), or a container whose item type is written
    and names tools (:func:`_is_tool_type`); ``Optional`` of one of those as well. A bare
    container (``-> list``, ``-> Iterator``) says nothing of its items: not a factory.
    """
    if inspect.isclass(hint) and issubclass(hint, ToolRegistry):
        return True
    origin_ = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin_ in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        return bool(members) and all(_returns_tools(a) for a in members)
    if origin_ not in TOOL_CONTAINERS:
        return False
    items = [a for a in (args[:1] if origin_ is abc.Generator else args) if a is not Ellipsis]
    return bool(items) and all(_is_tool_type(a) for a in items)


def _is_tool_type(hint: object) -> bool:
    """Say whether the item type of a factory's container names tools.

    ``BaseTool`` (or a subclass), ``Callable[..., X]`` with its argument list written, or a
    union of those; ``Any``, ``object``, a bare ``Callable`` and anything else do not.
    """
    if inspect.isclass(hint) and issubclass(hint, BaseTool):
        return True
    origin_ = typing.get_origin(hint)
    if origin_ is abc.Callable:
        return len(typing.get_args(hint)) == 2  # Callable[..., str]: arguments and result
    if origin_ in (typing.Union, types.UnionType):
        return all(_is_tool_type(a) for a in typing.get_args(hint))
    return False


def _is_list(value: object) -> typing.TypeGuard[Iterable[object]]:
    """Say whether ``value`` is an iterable that may hold tools (not text, not a mapping)."""
    return isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping | type)


def _what(value: object) -> str:
    """Name what a value is, in a few words, never what it holds (the registry's words)."""
    return scrub_text(describe_value(value))


def _said(exc: BaseException) -> str:
    """Return an exception in one scrubbed line: its type and first line."""
    text = str(exc).strip().splitlines()
    return scrub_text(f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__)
