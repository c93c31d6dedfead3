"""The MCP servers file: the usual ``mcpServers`` shape, with planexec's own overrides.

::

    {
      "mcpServers": {
        "notes": {
          "command": "python", "args": ["-m", "notes"], "env": {"NOTES_TOKEN": "${NOTES_TOKEN}"}
        },
        "search": {
          "url": "http://127.0.0.1:8000/mcp",
          "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
          "planexec": {"tools": {"purge": {"destructive": true, "idempotent": false}}}
        }
      }
    }

A server is either a command (stdio: ``command``, ``args``, ``env``, ``cwd``) or a URL
(streamable HTTP: ``url``, ``headers``). ``${NAME}`` in any of those is replaced with the
environment variable ``NAME`` (an unset one is an error). Values of ``env`` and ``headers``
whose names mark a secret (``*TOKEN*``, ``*KEY*``, ``Authorization``...: the rule of
:mod:`planexec.redaction.secrets`) are registered as secrets, so they are scrubbed from
everything planexec records or prints.

A server's optional ``planexec`` block holds what the operator says over the server: per tool
(or ``"*"`` for every tool of that server) the hints ``read_only``, ``destructive``,
``idempotent`` and ``open_world``, which replace the server's own; ``prefix``, the text put
before its tools' names (default: the server's name); ``timeout``, the seconds to wait for it
to start and answer the handshake.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from planexec.errors import ConfigurationError
from planexec.redaction.secrets import SECRET_NAME, register_secret, register_url_secrets

CONFIG_ENV = "PLANEXEC_MCP_CONFIG"
"""Environment variable naming the MCP servers file of the graph ``langgraph.json`` serves."""

DEFAULT_TIMEOUT = 30.0
"""Seconds a server may take to start and answer MCP's handshake."""

SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
HTTP_TRANSPORTS = frozenset({"http", "streamable_http", "streamable-http", "streamableHttp"})


class ToolHints(BaseModel):
    """The operator's word on one tool (or every tool of a server): replaces the server's hints."""

    model_config = ConfigDict(extra="forbid")

    read_only: bool | None = None
    """The tool changes nothing: not side-effecting."""
    destructive: bool | None = None
    """The tool may delete or overwrite (meaningful only if not read-only)."""
    idempotent: bool | None = None
    """Calling it again with the same arguments has no further effect: a timed-out call may be
    retried."""
    open_world: bool | None = None
    """The tool reaches things beyond the server (the web, other people)."""


class PlanexecOptions(BaseModel):
    """A server's ``planexec`` block: what the operator says over the server."""

    model_config = ConfigDict(extra="forbid")

    tools: dict[str, ToolHints] = Field(default_factory=dict)
    prefix: str | None = None
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, le=3600)

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9_-]{0,40}", value):
            raise ValueError("a prefix is up to 40 letters, digits, '_' or '-'")
        return value


class ServerConfig(BaseModel):
    """One entry of ``mcpServers``: a command to start (stdio) or a URL (streamable HTTP)."""

    model_config = ConfigDict(extra="ignore")  # other clients' keys (disabled, alwaysAllow...)

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    transport: str | None = None
    type: str | None = None
    planexec: PlanexecOptions = Field(default_factory=PlanexecOptions)

    @model_validator(mode="after")
    def _one_kind(self) -> ServerConfig:
        kind = self.transport or self.type
        if self.command is not None and self.url is not None:
            raise ValueError("give either command (stdio) or url (streamable HTTP), not both")
        if self.command is None and self.url is None:
            raise ValueError("give command (a stdio server) or url (a streamable HTTP server)")
        if kind is not None and kind != "stdio" and kind not in HTTP_TRANSPORTS:
            raise ValueError(
                f"transport {kind!r} is not supported: use stdio (command) or streamable HTTP "
                "(url; 'http' or 'streamable_http')"
            )
        if self.url is not None and kind == "stdio":
            raise ValueError("transport stdio needs a command, not a url")
        if self.command is not None and kind in HTTP_TRANSPORTS:
            raise ValueError(f"transport {kind} needs a url, not a command")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, not {self.url[:20]!r}")
        return self

    @property
    def kind(self) -> Literal["stdio", "http"]:
        """``stdio`` for a command, ``http`` for a URL."""
        return "stdio" if self.command is not None else "http"


class McpConfig(BaseModel):
    """The whole file: ``mcpServers``, by name."""

    model_config = ConfigDict(extra="ignore")

    mcpServers: dict[str, ServerConfig]  # the file's own key

    @field_validator("mcpServers")
    @classmethod
    def _names(cls, servers: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        for name in servers:
            if not SERVER_NAME.match(name):
                raise ValueError(
                    f"server name {name!r}: use up to 40 letters, digits, '_' or '-' "
                    "(it names the server's tools)"
                )
        return servers


def load_mcp_config(source: str | os.PathLike[str] | dict[str, Any]) -> McpConfig:
    """Read an MCP servers file (or its parsed JSON), expand ``${VAR}`` and register secrets.

    Raises :class:`~planexec.errors.ConfigurationError` naming the file and the field at fault.
    """
    where = "the MCP config"
    if isinstance(source, dict):
        data: Any = source
    else:
        path = Path(source)
        where = f"MCP config {path}"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigurationError(f"{where} does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"{where} cannot be read: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"{where} is not JSON: {exc}") from None
    if not isinstance(data, dict) or "mcpServers" not in data:
        raise ConfigurationError(f'{where} must be a JSON object with "mcpServers"')
    try:
        config = McpConfig.model_validate(_expanded(data, where))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'the file'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)
        )
        raise ConfigurationError(f"{where}: {problems}") from None
    for server in config.mcpServers.values():
        _register_secrets(server)
    return config


def _expanded(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Return the file's data with ``${VAR}`` replaced in each server's strings."""
    servers = data.get("mcpServers")
    if not isinstance(servers, dict):
        return data
    out: dict[str, Any] = {}
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            out[name] = entry
            continue
        fixed = dict(entry)
        for key in ("command", "cwd", "url"):
            if isinstance(fixed.get(key), str):
                fixed[key] = _expand(fixed[key], f"{where}: mcpServers.{name}.{key}")
        if isinstance(fixed.get("args"), list):
            fixed["args"] = [
                _expand(a, f"{where}: mcpServers.{name}.args") if isinstance(a, str) else a
                for a in fixed["args"]
            ]
        for key in ("env", "headers"):
            if isinstance(fixed.get(key), dict):
                fixed[key] = {
                    k: _expand(v, f"{where}: mcpServers.{name}.{key}.{k}")
                    if isinstance(v, str)
                    else v
                    for k, v in fixed[key].items()
                }
        out[name] = fixed
    return {**data, "mcpServers": out}


def _expand(text: str, field: str) -> str:
    def value(match: re.Match[str]) -> str:
        found = os.environ.get(match.group(1))
        if found is None:
            raise ConfigurationError(f"{field} uses ${{{match.group(1)}}}, which is not set")
        return found

    return VARIABLE.sub(value, text)


URL_KEY_NAMES = frozenset({"key", "apikey", "api_key", "sig", "signature", "code", "access"})
"""Query parameter names that carry a key though the environment's rule does not name them."""


def _register_secrets(server: ServerConfig) -> None:
    """Register the secrets a server's entry holds, by the environment's own naming rule."""
    for name, value in (server.env or {}).items():
        if SECRET_NAME.search(name):
            register_secret(value)
        if "://" in value:
            register_url_secrets(value)
    for name, value in server.headers.items():
        if SECRET_NAME.search(name) or name.lower() in SECRET_HEADERS:
            register_secret(value)
            scheme, _, credentials = value.partition(" ")
            if credentials and scheme.isalpha():  # "Bearer TOKEN": the token alone too
                register_secret(credentials.strip())
    if server.url is not None:
        register_url_secrets(server.url)
        for secret in url_tokens(server.url):
            register_secret(secret)


def url_tokens(url: str) -> list[str]:
    """Return what in an MCP server's URL is a key: key-named query values, random path parts.

    Hosted MCP servers often take their key in the URL (``/mcp/sk-ak-3f9…`` or
    ``?api_key=…``). A query value counts when its name marks a secret (the environment's
    rule: ``key``, ``token``, ``secret``, ``auth``…); a path part when it mixes letters and
    digits over 12+ characters. Words (``europe``, ``production-server-eu``) are not secrets:
    registered, they would be redacted from every plan and output.
    """
    parts = urlsplit(url)
    found = [
        value
        for name, value in parse_qsl(parts.query)
        if SECRET_NAME.search(name) or name.lower() in URL_KEY_NAMES
    ]
    for segment in filter(None, parts.path.split("/")):
        digits = sum(c.isdigit() for c in segment)
        if len(segment) >= 12 and digits >= 2 and any(c.isalpha() for c in segment):
            found.append(segment)
    return found
