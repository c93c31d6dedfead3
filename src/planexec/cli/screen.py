"""The prompt and the lines printed while it waits: a line goes above the prompt, never into it.

A plan whose read-only steps run while it is reviewed (``--speculate``) is asked about in a
thread of its own (:func:`planexec.runs.streaming.answer_in_thread`) while the run's events
keep arriving. On a terminal, a line that arrives while the prompt waits clears the prompt's
line, is printed, and the prompt is printed again below it (what the user typed so far is
still read when they press Enter, even if no longer shown). Elsewhere (a pipe, a log) lines
are printed as they come.
"""

from __future__ import annotations

import threading
from typing import Any

from rich.console import Console, RenderableType
from rich.control import Control
from rich.segment import ControlType
from rich.text import Text

from planexec.cli.keys import ask_line

CLEAR_LINE = Control((ControlType.CARRIAGE_RETURN,), (ControlType.ERASE_IN_LINE, 2))


class PromptLine:
    """Prints on ``out``; keeps the prompt that waits for an answer whole."""

    def __init__(self, out: Console) -> None:
        """Print on ``out`` (the console the prompt is asked on)."""
        self.out = out
        self.lock = threading.Lock()
        self.prompt: Text | str | None = None

    def input(self, prompt: Text | str) -> str:
        """Ask ``prompt`` and return the answer; lines printed meanwhile go above it."""
        with self.lock:
            self.prompt = prompt
        try:
            return ask_line(self.out, prompt)
        finally:
            with self.lock:
                self.prompt = None

    def print(self, *objects: RenderableType, **kwargs: Any) -> None:
        """Print as ``Console.print`` does; above the prompt if one waits on a terminal."""
        with self.lock:
            waiting = self.prompt is not None and self.out.is_terminal
            if waiting:
                self.out.control(CLEAR_LINE)
            self.out.print(*objects, **kwargs)
            if waiting and self.prompt is not None:
                self.out.print(self.prompt, end="")
