"""The tool registry: the tools a planner may plan with and an executor may call."""

from __future__ import annotations

import inspect
import itertools
import json
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from typing import Any, TypeAlias

from langchain_core.tools import BaseTool, Tool
from langchain_core.tools import tool as as_tool
from pydantic import BaseModel, create_model

from planexec.concurrency.toolcalls import RUNS_ON_LOOP, SIDE_EFFECTS, is_async_tool, on_loop
from planexec.errors import ConfigurationError, ToolNameClashError
from planexec.plan.compact import STEP_FIELDS
from planexec.plan.shapes import compact
from planexec.tools import returns
from planexec.tools.returns import OUTPUT_SCHEMA

# SIDE_EFFECTS ("side_effects"): the metadata key of whether a tool writes, deletes or sends
# something (True or False); one that does not declare it counts as side-effecting
# (:meth:`ToolRegistry.has_side_effects`). Defined by the layer below, which reads it too.
OPEN_WORLD = "open_world"
"""Metadata key of whether a tool reaches outside the run's workspace (the network, other
systems: True) or only reads the workspace and its own inputs (False). Declared nowhere: it
counts as reaching outside (:meth:`ToolRegistry.is_open_world`). Only a read-only tool that
declares ``open_world=False`` may run before its plan is approved (speculation): a read-only
tool that reaches outside could send the data it is given before anyone reviewed the plan."""
UNDECLARED_NOTE = "side effects not declared"
"""Why an approval names a tool that declares nothing as side-effecting."""
ACCEPTED = (
    "a ToolRegistry or an iterable of LangChain tools and plain functions "
    "(e.g. [my_tool, my_function] or [*default_registry(), my_tool])"
)
"""What ``build_graph(tools=...)`` and :meth:`ToolRegistry.of` accept."""
MAX_TOOLS = 10_000
"""The most tools one registry is made of: an iterable holding more (an endless iterator) is
refused after reading this many and one more, never read on forever."""
FILE_FIELDS = "file_fields"
TYPICAL_LATENCY = "typical_latency"
"""Metadata key of a tool's typical seconds a call (slots and the approval's estimate use it)."""
MCP_KEY = "mcp"
"""Metadata key of what planexec knows of an MCP tool: server, tool, hints, and ``why`` it has
side effects (:mod:`planexec.tools.mcp.hints`)."""


class ToolRegistry:
    """A named set of LangChain tools, each marked with whether it has side effects.

    Any ``@tool`` function or ``BaseTool`` with an args schema is added in one line::

        registry.register(my_tool, side_effects=True, file_fields=["path"])

    **Fail safe:** a tool that does not declare its side effects counts as side-effecting
    (approval under the ``first`` policy, the approval's ``side_effect_tools`` and a note
    ``side effects not declared``). Declare them with ``register(..., side_effects=False)``,
    in the tool's own ``metadata={"side_effects": False}`` (any LangChain tool; after ``@tool``
    set ``my_tool.metadata = {...}``), or for an MCP tool by its server's hints.
    :meth:`has_side_effects` is the one place that decides.

    A name is one tool's: registering another tool under it is a
    :class:`~planexec.errors.ToolNameClashError` naming both, unless ``replace=True``.

    What a tool returns is declared by its function's return annotation (a TypedDict, a
    pydantic model, a dataclass, plain types), or by ``output_schema=`` (a type or a JSON
    Schema): plans are checked against it (``$3.path`` must be a field step 3's tool
    produces) and so is each output when it is produced (:mod:`planexec.tools.returns`).

    ``file_fields`` names the top-level fields of the tool's output that hold workspace paths
    (text, or lists of text): the evaluator checks those files exist, and the files of tools
    with side effects are the run's artifacts. No other output field is taken for a file.
    Both can also be set in the tool's own ``metadata`` (``{"file_fields": [...]}``).
    """

    def __init__(self, tools: Iterable[BaseTool | Callable[..., Any]] = ()) -> None:
        """Register the given tools (two of one name: :class:`ToolNameClashError`)."""
        self._tools: dict[str, BaseTool] = {}
        for item in bounded(tools):
            self.register(item)

    @classmethod
    def of(cls, tools: object) -> ToolRegistry:
        """Return ``tools`` as a registry: a registry as it is, else one of exactly those tools.

        ``tools`` is a :class:`ToolRegistry` or any iterable of LangChain tools (``BaseTool``,
        ``@tool`` functions) and plain functions (what ``create_agent`` takes). Anything else
        (a mapping, a text, a single tool, an item that is not callable) is a ``TypeError``;
        more than :data:`MAX_TOOLS` items a ``ValueError``. What the iterable itself raises while
        it is read is the caller's own error and propagates as it is.
        """
        if isinstance(tools, ToolRegistry):
            return tools
        if (
            isinstance(tools, str | bytes | Mapping | BaseTool)
            or not isinstance(tools, Iterable)
            or callable(tools)
        ):
            raise TypeError(f"tools must be {ACCEPTED}, not {describe_value(tools)}")
        items = bounded(tools)
        for item in items:
            if not (isinstance(item, BaseTool) or callable(item)) or isinstance(item, type):
                raise TypeError(f"tools must be {ACCEPTED}; one item is {describe_value(item)}")
        return cls(items)

    def register(
        self,
        item: BaseTool | Callable[..., Any],
        *,
        side_effects: bool | None = None,
        open_world: bool | None = None,
        file_fields: Sequence[str] | None = None,
        typical_latency: float | None = None,
        runs_on_loop: bool | None = None,
        output_schema: object | None = None,
        replace: bool = False,
    ) -> BaseTool:
        """Add a tool (a plain function is wrapped with ``@tool``); return it.

        ``side_effects`` says whether the tool writes, deletes or sends something (else its
        ``metadata["side_effects"]``; declared nowhere: it counts as side-effecting).
        ``open_world`` says whether it reaches outside the run's workspace (else its
        ``metadata["open_world"]``; declared nowhere: it does): only a tool declared free of
        both may run while its plan awaits approval (:data:`OPEN_WORLD`).
        A name already registered is a :class:`ToolNameClashError` naming both tools, unless
        ``replace=True`` (then the new tool takes the name).

        ``typical_latency`` is how long a call usually takes, in seconds (also settable as the
        tool's ``metadata["typical_latency"]``): free slots go first to the longest chain it
        weighs, and the approval's estimate adds it up along the slowest chain.
        ``runs_on_loop=True`` lets an async tool that never blocks run on the steps' own event
        loop instead of a worker thread of its own
        (:data:`planexec.concurrency.toolcalls.RUNS_ON_LOOP`).
        ``output_schema`` declares what the tool returns (a type, or a JSON Schema mapping),
        in place of its return annotation or ``metadata["output_schema"]``.
        """
        tool_ = _with_args_schema(item if isinstance(item, BaseTool) else _function_tool(item))
        if getattr(tool_, "response_format", None) == "content_and_artifact":
            from planexec.tools.mcp.adapters import adapt, from_adapters

            if from_adapters(tool_):  # langchain-mcp-adapters: hints read, errors raised
                tool_ = adapt(tool_)
        if tool_.name in STEP_FIELDS:  # {"description": "x"} would be a model step, not a call
            raise ValueError(
                f"a tool may not be named {tool_.name!r}: plan steps use that name for a field "
                f"({', '.join(sorted(STEP_FIELDS))})"
            )
        if isinstance(file_fields, str):
            raise TypeError(f"file_fields is a list of field names, not the text {file_fields!r}")
        marks: dict[str, Any] = {}
        if side_effects is not None:
            marks[SIDE_EFFECTS] = _checked_side_effects(tool_.name, side_effects)
        else:
            _checked_side_effects(tool_.name, (tool_.metadata or {}).get(SIDE_EFFECTS))
        if open_world is not None:
            marks[OPEN_WORLD] = _checked_mark(tool_.name, OPEN_WORLD, open_world)
        else:
            _checked_mark(tool_.name, OPEN_WORLD, (tool_.metadata or {}).get(OPEN_WORLD))
        if file_fields is not None:
            marks[FILE_FIELDS] = tuple(file_fields)
        if typical_latency is not None:
            if not (isinstance(typical_latency, int | float) and 0 <= typical_latency < 1e9):
                raise ValueError(
                    f"typical_latency must be a number of seconds, not {typical_latency!r}"
                )
            marks[TYPICAL_LATENCY] = float(typical_latency)
        if runs_on_loop is not None:
            marks[RUNS_ON_LOOP] = runs_on_loop
        declared = output_schema if output_schema is not None else _given_schema(tool_)
        schema = (
            returns.declared_schema(declared, tool_.name)
            if declared is not None
            else returns.annotated_schema(tool_)
        )
        if schema is not None or OUTPUT_SCHEMA in (tool_.metadata or {}):
            marks[OUTPUT_SCHEMA] = schema
        if marks:  # on a copy: the same tool may be registered differently elsewhere
            tool_ = tool_.model_copy(update={"metadata": {**(tool_.metadata or {}), **marks}})
        if _check_runs_on_loop(tool_):
            tool_ = on_loop(tool_)
        taken = self._tools.get(tool_.name)
        if taken is not None and not replace:
            raise ToolNameClashError(
                f"tool name {tool_.name!r} is taken: {origin(tool_)} would replace "
                f"{origin(taken)}. Pass replace=True to replace it, or rename one"
                f"{_clash_hint(tool_)}"
            )
        self._tools[tool_.name] = tool_
        return tool_

    def __contains__(self, name: object) -> bool:
        """Say whether a tool of that name is registered."""
        return name in self._tools

    def __iter__(self) -> Iterator[BaseTool]:
        """Iterate over the tools in name order."""
        return iter(self._tools[name] for name in self.names())

    def __len__(self) -> int:
        """Count the tools."""
        return len(self._tools)

    def names(self) -> list[str]:
        """Return the registered tools' names, sorted."""
        return sorted(self._tools)

    def get(self, name: str) -> BaseTool:
        """Return the tool called ``name`` (KeyError if there is none)."""
        return self._tools[name]

    def has_side_effects(self, name: str) -> bool:
        """Say whether a tool writes, deletes or sends something.

        The one place that decides: a tool counts as side-effecting unless it declares
        ``side_effects=False`` (at registration, in its metadata, or by its MCP hints);
        an unknown tool counts as one too.
        """
        declared = self._declared(name)
        return True if declared is None else declared

    def is_open_world(self, name: str) -> bool:
        """Say whether a tool may reach outside the run's workspace (see :data:`OPEN_WORLD`).

        True unless it declares ``open_world=False`` (at registration, in its metadata, or by
        its MCP ``openWorldHint``); an unknown tool counts as open too.
        """
        found = self._tools.get(name)
        value = (found.metadata or {}).get(OPEN_WORLD) if found is not None else None
        return value is not False

    def side_effect_note(self, name: str) -> str | None:
        """Say why a side-effecting tool counts as one, when it is not simply declared so.

        An MCP tool: its hints' meaning (``destructive per the server's hint``); a tool that
        declares nothing: :data:`UNDECLARED_NOTE`.
        """
        found = self._tools.get(name)
        if found is None or not self.has_side_effects(name):
            return None
        mcp = (found.metadata or {}).get(MCP_KEY)
        why = mcp.get("why") if isinstance(mcp, dict) else None
        if isinstance(why, str):
            return why
        return UNDECLARED_NOTE if self._declared(name) is None else None

    def _declared(self, name: str) -> bool | None:
        """Return the tool's declared side effects (None: unknown tool, or nothing declared)."""
        found = self._tools.get(name)
        value = (found.metadata or {}).get(SIDE_EFFECTS) if found is not None else None
        return value if isinstance(value, bool) else None

    def file_fields(self, name: str | None) -> tuple[str, ...]:
        """Return the output fields of a tool that name workspace files (none if unknown)."""
        found = self._tools.get(name) if name is not None else None
        if found is None:
            return ()
        declared = (found.metadata or {}).get(FILE_FIELDS) or ()
        return tuple(str(f) for f in declared)

    def typical_latency(self, name: str | None) -> float | None:
        """Return how long a call of the tool usually takes, when it was declared."""
        found = self._tools.get(name) if name is not None else None
        value = (found.metadata or {}).get(TYPICAL_LATENCY) if found is not None else None
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            return None  # NaN fails "value >= 0" too
        return float(value)

    def output_schema(self, name: str | None) -> dict[str, Any] | None:
        """Return the JSON Schema of a tool's output, when it declares one."""
        found = self._tools.get(name) if name is not None else None
        return returns.output_schema(found) if found is not None else None

    def args_json_schema(self, name: str) -> dict[str, Any] | None:
        """Return the JSON Schema of a tool's model-facing arguments, if it has one."""
        schema = self._tools[name].tool_call_schema
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return schema.model_json_schema()
        return dict(schema) if isinstance(schema, dict) else None

    def args_schema(self, name: str) -> type[BaseModel] | None:
        """Return the pydantic schema of a tool's model-facing arguments, if it has one."""
        schema = self._tools[name].tool_call_schema
        return schema if isinstance(schema, type) and issubclass(schema, BaseModel) else None

    def sole_parameter(self, name: str) -> str | None:
        """Return the argument a bare value fills in a compact step (``{"load_csv": "a.csv"}``).

        That is the tool's one required argument, or its only argument when none is required;
        None when there is no such argument (KeyError if there is no such tool).
        """
        schema = self.args_schema(name)
        if schema is None:
            return None
        fields = schema.model_fields
        required = [n for n, f in fields.items() if f.is_required()]
        if len(required) == 1:
            return required[0]
        return next(iter(fields)) if not required and len(fields) == 1 else None

    def describe(self) -> str:
        """Describe every tool (name, description, side effects, JSON argument schema).

        A tool that declares its output has ``returns``: the output's shape in one line
        (:func:`planexec.plan.shapes.compact`), so references name fields that exist.
        """
        entries = []
        for tool_ in self:
            schema = tool_.tool_call_schema
            args = (
                schema.model_json_schema()
                if isinstance(schema, type) and issubclass(schema, BaseModel)
                else schema
            )
            entry = {
                "name": tool_.name,
                "description": tool_.description,
                "side_effects": self.has_side_effects(tool_.name),
                "args_schema": args,
            }
            produced = self.output_schema(tool_.name)
            if produced is not None:
                entry["returns"] = compact(produced)
            entries.append(entry)
        return json.dumps(entries, indent=1, default=str)


ADAPTERS = "langchain-mcp-adapters"
"""What an MCP tool's ``metadata["mcp"]["via"]`` says when it was made by those adapters."""


def _clash_hint(tool_: BaseTool) -> str:
    """Say how an MCP tool's source can name its tools apart (nothing for other tools)."""
    mcp = (tool_.metadata or {}).get(MCP_KEY)
    if not isinstance(mcp, dict):
        return ""
    if mcp.get("via") == ADAPTERS:
        return (
            " (MultiServerMCPClient(..., tool_name_prefix=True) names each server's tools "
            "server_tool)"
        )
    return " (an MCP server's planexec.prefix renames its tools)"


def origin(tool_: BaseTool) -> str:
    """Say in a line which tool this is: its MCP server and tool, or where its code lives."""
    mcp = (tool_.metadata or {}).get(MCP_KEY)
    if isinstance(mcp, dict) and mcp.get("server"):
        return f"MCP server {mcp['server']!r} tool {mcp.get('tool', tool_.name)!r}"
    code = getattr(tool_, "func", None) or getattr(tool_, "coroutine", None)
    code = getattr(code, "__wrapped__", code)
    where = f"{getattr(code, '__module__', '')}.{getattr(code, '__qualname__', '')}".strip(".")
    if not where or "<lambda>" in where:
        where = f"{type(tool_).__module__}.{type(tool_).__qualname__}"
    summary = (tool_.description or "").strip().splitlines()
    said = summary[0] if summary else ""
    said = said if len(said) <= 60 else said[:59] + "…"
    return f"{where} ({said!r})" if said else where


def bounded(tools: Iterable[Any]) -> list[Any]:
    """Read an iterable of tools into a list: at most :data:`MAX_TOOLS` (else a ValueError)."""
    items = list(itertools.islice(tools, MAX_TOOLS + 1))
    if len(items) > MAX_TOOLS:
        raise ValueError(
            f"tools holds more than {MAX_TOOLS} items (an endless iterator?): a registry takes at "
            f"most {MAX_TOOLS} tools"
        )
    return items


BUILTIN_FUNCTIONS = (
    types.BuiltinFunctionType,
    types.BuiltinMethodType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
)
"""The types of functions written in C (``print``, ``len``, ``str.join``): not tools."""


def code_name(value: object) -> str:
    """Name a function, class or other callable by its ``module.qualname`` (for messages)."""
    named = value if hasattr(value, "__qualname__") else type(value)
    qualname = getattr(named, "__qualname__", type(value).__qualname__)
    module = getattr(named, "__module__", None)
    return f"{module}.{qualname}" if module and module != "builtins" else str(qualname)


def describe_value(value: object) -> str:
    """Say what a value is, for an error message, never what it holds.

    A value is named by its type (and its length): never a text's, bytes' or number's value,
    never a container's items; a function, class or tool by its qualified name only. A value
    whose ``repr`` or ``len`` fails is still described.
    """
    kind = type(value).__name__
    if isinstance(value, BaseTool):
        return f"a single tool ({value.name!r}); put it in a list"
    if value is None:
        return "None"
    if isinstance(value, bool | int | float | complex):
        return f"a value of type {kind}"
    if isinstance(value, str):
        return f"a str of {len(value)} characters"
    if isinstance(value, bytes | bytearray):
        return f"{len(value)} bytes (of type {kind})"
    if isinstance(value, BUILTIN_FUNCTIONS):
        return f"the builtin function {code_name(value)}"
    if inspect.isfunction(value) or inspect.ismethod(value):
        return f"the function {code_name(value)}"
    if isinstance(value, type):
        return f"the class {code_name(value)}"
    size = _size(value)
    if isinstance(value, Mapping):
        return f"a mapping of type {kind}" + (f" ({size} entries)" if size is not None else "")
    return f"an object of type {kind}" + (f" ({size} items)" if size is not None else "")


def _size(value: object) -> int | None:
    """Return a container's length, when it has one it can tell."""
    if not isinstance(value, Sized):
        return None
    try:
        return len(value)
    except Exception:  # a user's __len__ that fails: the type alone describes it
        return None


def _function_tool(item: Callable[..., Any]) -> BaseTool:
    """Make a LangChain tool of a plain function, or say by name why it cannot be one."""
    if isinstance(item, BUILTIN_FUNCTIONS):
        raise TypeError(
            f"not a tool: {code_name(item)} is a builtin function; wrap it in a function of "
            "your own with a docstring"
        )
    if inspect.isasyncgenfunction(item):
        raise TypeError(
            f"{code_name(item)}: async generators are not supported as tools (a tool returns "
            "one value): make it an async function that returns the values"
        )
    try:
        made = as_tool(item)
    except ValueError as exc:  # LangChain's message does not say which function
        name = code_name(item)
        given = getattr(item, "__name__", "")
        given = given if given.isidentifier() else "func"
        if "docstring" in str(exc):
            raise ValueError(
                f"{name} cannot be a tool: it has no docstring (the planner reads it as the "
                f"tool's description). Add one, or wrap it: StructuredTool.from_function("
                f"{given}, description=...)"
            ) from None
        raise ValueError(
            f"{name} cannot be a tool: {str(exc).rstrip('.')}; give a function with a docstring, "
            "or wrap it: StructuredTool.from_function(func, name=..., description=...)"
        ) from None
    declared = getattr(item, "metadata", None)  # fn.metadata = {"side_effects": ...}, as tools.md
    if isinstance(declared, Mapping):
        made.metadata = {**dict(declared), **(made.metadata or {})}
    return made


def _checked_mark(name: str, key: str, value: object) -> bool | None:
    """Return a True/False mark; refuse one that is neither True, False nor absent."""
    if value is None or isinstance(value, bool):
        return value
    raise ConfigurationError(f"{name}: {key} must be True or False, not {value!r}")


def _checked_side_effects(name: str, value: object) -> bool | None:
    """Return a side-effects mark; refuse one that is neither True, False nor absent."""
    if value is None or isinstance(value, bool):
        return value
    raise ConfigurationError(
        f"{name}: side_effects must be True or False, not {value!r} (leave it out and the "
        "tool counts as side-effecting)"
    )


ToolsLike: TypeAlias = ToolRegistry | Iterable[BaseTool | Callable[..., Any]]
"""What every ``tools=`` of planexec takes (:meth:`ToolRegistry.of`): a registry, or tools."""


def _given_schema(tool_: BaseTool) -> object | None:
    """Return the output schema a tool's own metadata gives (``{"output_schema": ...}``)."""
    return (tool_.metadata or {}).get(OUTPUT_SCHEMA)


def _with_args_schema(tool_: BaseTool) -> BaseTool:
    """Return the tool, or for a single-input ``Tool`` with no schema a copy with its one.

    LangChain shows ``Tool(name=..., func=...)`` to models as one text argument and calls it
    with ``{"tool_input": text}``, yet its ``tool_call_schema`` lists ``args``, ``config`` and
    ``kwargs``: plans are checked against (and the planner shown) what it really takes.
    """
    if not isinstance(tool_, Tool) or tool_.args_schema is not None:
        return tool_
    schema = create_model(tool_.name, tool_input=(str, ...))
    return tool_.model_copy(update={"args_schema": schema})


def _check_runs_on_loop(tool_: BaseTool) -> bool:
    """Say whether a tool is marked :data:`RUNS_ON_LOOP`.

    Refuses a mark that is not a bool, or on a tool that is not async.
    """
    mark = (tool_.metadata or {}).get(RUNS_ON_LOOP)
    if mark is not None and not isinstance(mark, bool):
        raise ValueError(f"{tool_.name}: runs_on_loop must be True or False, not {mark!r}")
    if mark and not is_async_tool(tool_):
        raise ValueError(
            f"{tool_.name} cannot run on the loop: only an async tool can (a sync tool would "
            "block every step while it runs)"
        )
    return bool(mark)
