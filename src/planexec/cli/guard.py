"""Run a command so that a mistake or a database failure prints one scrubbed line, never a trace."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import sys
import traceback
from collections.abc import Coroutine
from typing import Any, NoReturn

import psycopg
import typer
from rich.markup import escape

from planexec.cli.render import console
from planexec.cli.review import Paused
from planexec.errors import PlanexecError
from planexec.scrubbed_io import scrubbed_stdio
from planexec.store_guard import CheckpointStoreError, describe

EXIT_FAILED, EXIT_ERROR = 1, 2


def error_line(message: str) -> NoReturn:
    """Print ``error: MESSAGE`` on stderr and exit 2 (for mistakes caught before a command)."""
    console(stderr=True).print(f"[red]error:[/] {message}")
    raise typer.Exit(EXIT_ERROR)


def guard(coro: Coroutine[Any, Any, int]) -> None:
    """Run a command's coroutine and exit with its code; print failures in one line.

    Everything printed meanwhile (the command's lines, what tools print, errors, a crash's
    traceback) goes through ``scrubbed_stdio``: no secret value or database password. A
    database failure exits 2 like a mistake: the run stopped where its last saved checkpoint
    is, and ``planexec resume`` continues it from there once the database is back.
    """
    # psycopg logs a warning of its own when a dead connection is torn down: one line is ours
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    with scrubbed_stdio():
        errors = console(stderr=True)
        try:
            code = asyncio.run(coro)
        except Paused as exc:
            errors.print(escape(str(exc)))
            code = EXIT_FAILED
        except CheckpointStoreError as exc:
            errors.print(
                f"[red]error:[/] {escape(str(exc))} Continue with `planexec resume THREAD_ID` "
                "(the thread shown above)."
            )
            code = EXIT_ERROR
        except (PlanexecError, OSError) as exc:
            errors.print(f"[red]error:[/] {escape(str(exc))}")
            code = EXIT_ERROR
        except (psycopg.Error, sqlite3.Error) as exc:
            errors.print(
                f"[red]error:[/] the run database failed ({escape(describe(exc))}); what was "
                "saved before is kept: continue with `planexec resume THREAD_ID` (the thread "
                "shown above) when it works again"
            )
            code = EXIT_ERROR
        except KeyboardInterrupt:
            code = 130
        except Exception:  # a bug: its traceback, scrubbed like all output
            sys.stderr.write(traceback.format_exc())
            code = EXIT_FAILED
    raise typer.Exit(code)
