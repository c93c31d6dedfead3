"""Run a command so that a mistake or a database failure prints one scrubbed line, never a trace."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import sys
import threading
import traceback
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import psycopg
import typer

from planexec.cli.keys import signals_wake_the_loop
from planexec.cli.review import Interrupted, Paused
from planexec.cli.ui import EXIT_PIPE, console, styled
from planexec.errors import PlanexecError
from planexec.redaction.stdio import scrubbed_stdio
from planexec.runs.streaming import DECIDE_THREAD
from planexec.storage.store_guard import CheckpointStoreError, describe_failure

EXIT_FAILED, EXIT_ERROR, EXIT_INTERRUPTED = 1, 2, 130


class UserError(PlanexecError):
    """A mistake the user can fix; printed as one line."""


@dataclass
class Running:
    """The thread a command works on, once known: a second Ctrl-C still says how to resume."""

    thread_id: str | None = None


def _error(message: str) -> None:
    console(stderr=True).print(styled(("error:", "red"), " ", message))


async def _woken_by_signals(coro: Coroutine[Any, Any, int]) -> int:
    """Await ``coro`` on a loop that a Ctrl-C wakes, whichever thread the kernel gives it."""
    with signals_wake_the_loop():
        return await coro


def _outcome(coro: Coroutine[Any, Any, int], running: Running) -> int:
    """Run the command; return its exit code, printing a failure in one line."""
    try:
        return asyncio.run(_woken_by_signals(coro))
    except Paused as exc:
        console(stderr=True).print(str(exc))
        return EXIT_FAILED
    except Interrupted as exc:
        console(stderr=True).print(styled(("\n" + str(exc), "yellow")))
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # a second Ctrl-C: asyncio raises it without waiting for the run
        how = f". Continue it with: planexec resume {running.thread_id}" * bool(running.thread_id)
        console(stderr=True).print(styled(("\ninterrupted" + how, "yellow")))
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader left (`| head`): stop quietly, as a shell tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE
    except CheckpointStoreError as exc:
        _error(f"{exc} Continue with `planexec resume THREAD_ID` (the thread shown above).")
    except (PlanexecError, OSError) as exc:
        _error(str(exc))
    except (psycopg.Error, sqlite3.Error) as exc:
        _error(
            f"the run database failed ({describe_failure(exc)}); what was saved before is kept: "
            "continue with `planexec resume THREAD_ID` (the thread shown above) when it works again"
        )
    return EXIT_ERROR


def guard(coro: Coroutine[Any, Any, int], running: Running | None = None) -> None:
    """Run a command's coroutine and exit with its code; print failures in one line.

    Everything printed meanwhile (the command's lines, what tools print, errors, a crash's
    traceback) goes through ``scrubbed_stdio``: no secret value or database password. A
    database failure exits 2 like a mistake: the run stopped where its last saved checkpoint
    is, and ``planexec resume`` continues it from there once the database is back.
    """
    # psycopg logs a warning of its own when a dead connection is torn down: one line is ours
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    with scrubbed_stdio():
        try:
            code = _outcome(coro, running or Running())
            sys.stdout.flush()
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            code = EXIT_PIPE
        except Exception:  # a bug: its traceback, scrubbed like all output
            sys.stderr.write(traceback.format_exc())
            code = EXIT_FAILED
    if code == EXIT_INTERRUPTED:  # said how to resume: a late Ctrl-C while exiting changes nothing
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if any(t.name == DECIDE_THREAD and t.is_alive() for t in threading.enumerate()):
            # a prompt still reads stdin in its thread (asked while read-only steps ran): the
            # interpreter's shutdown would abort on stdin's lock, so leave without it
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    raise typer.Exit(code)
