"""A hand-written stdio MCP server that misbehaves on purpose (no SDK between it and the pipe).

Its tools: ``ok`` (a text reply), ``stray_then_ok`` (a stray print, then the reply),
``surrogate`` (a reply holding a lone surrogate: valid JSON text no client can read) and
``chatty`` (writes a megabyte to its error output, then replies). With ``RAW_SILENT=1`` it
never answers ``initialize``. With ``RAW_TASK_TOOL=1`` it also lists ``long_job``, which
requires task augmentation (every plain call fails -32601), and ``maybe_task`` (optional).
"""

from __future__ import annotations

import json
import os
import sys

OUT = sys.stdout.buffer
TOOLS = ["ok", "stray_then_ok", "surrogate", "chatty"]


def send(raw: bytes) -> None:
    OUT.write(raw + b"\n")
    OUT.flush()


def reply(request_id: object, text: str) -> bytes:
    result = {"content": [{"type": "text", "text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def main() -> None:
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            if os.environ.get("RAW_SILENT"):
                continue
            info = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "0"},
            }
            send(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": info}).encode())
        elif method == "tools/list":
            tools = [
                {
                    "name": name,
                    "inputSchema": {"type": "object", "properties": {}},
                    "annotations": {"readOnlyHint": True},
                }
                for name in TOOLS
            ]
            if os.environ.get("RAW_TASK_TOOL"):
                for name, support in (("long_job", "required"), ("maybe_task", "optional")):
                    tools.append({**tools[0], "name": name, "execution": {"taskSupport": support}})
            result = {"tools": tools}
            send(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode())
        elif method == "tools/call":
            name = message["params"]["name"]
            if name == "long_job":
                error = {"code": -32601, "message": "long_job must be called as a task"}
                send(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode())
                continue
            if name == "stray_then_ok":
                send(b'debug: handling {"jsonrpc": "2.0", "method": "tools/call"}')
                send(b'{"log": "a JSON line that is no message"}')
            if name == "surrogate":
                head = json.dumps({"jsonrpc": "2.0", "id": request_id}).encode()[:-1]
                send(head + b', "result": {"content": [{"type": "text", "text": "a\\ud800"}]}}')
                continue
            if name == "chatty":
                sys.stderr.write("E" * 2**20 + "\nthe last words\n")
                sys.stderr.flush()
            send(reply(request_id, f"{name} done"))


if __name__ == "__main__":
    main()
