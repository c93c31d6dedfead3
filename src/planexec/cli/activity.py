"""A live status line while anything runs: each model call and step, with its elapsed time."""

from __future__ import annotations

import time

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.spinner import Spinner

from planexec.cli.ui import styled


class Activity:
    """What is running now, drawn by Rich's :class:`~rich.live.Live` on a terminal.

    Elsewhere (a pipe, a log file) nothing is redrawn: the caller prints a line when work
    starts and ends instead.
    """

    def __init__(self, out: Console) -> None:
        """Draw on ``out`` when it is a terminal."""
        self.out = out
        self.animated = out.is_terminal and not out.is_dumb_terminal
        self.running: dict[str, tuple[str, float]] = {}
        self.spinner = Spinner("dots")
        self.live: Live | None = None

    def begin(self, key: str, label: str) -> None:
        """Show ``label`` with its elapsed time until :meth:`end` of ``key``."""
        self.running[key] = (label, time.monotonic())
        if self.animated and self.live is None:
            self.live = Live(
                self,
                console=self.out,
                transient=True,
                refresh_per_second=8,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self.live.start()

    def relabel(self, key: str, label: str) -> None:
        """Change what ``key`` shows (e.g. how many plan steps are written so far)."""
        if key in self.running:
            self.running[key] = (label, self.running[key][1])

    def end(self, key: str) -> float | None:
        """Stop showing ``key``; return its elapsed seconds (None if it was not shown)."""
        found = self.running.pop(key, None)
        if not self.running:
            self.stop()
        return time.monotonic() - found[1] if found else None

    def stop(self) -> None:
        """Take the status line off the screen (before a prompt, at the end)."""
        if self.live is not None:
            self.live.stop()
            self.live = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """Draw the spinner and everything running, each with its elapsed time."""
        now = time.monotonic()
        items = list(self.running.values())
        line = styled(
            *(f"{' · ' if i else ''}{label} {now - t0:.1f}s" for i, (label, t0) in enumerate(items))
        )
        line.no_wrap, line.overflow = True, "ellipsis"
        self.spinner.text = line
        yield self.spinner.render(console.get_time())
