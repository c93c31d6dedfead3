r"""The CLI's console: every piece of text it prints is shown literally, whatever it holds.

One enforcement point: :func:`console` makes a :class:`LiteralConsole`. Strings are never read
as Rich markup or ``:emoji:`` codes, and control characters (an escape sequence in a plan, a
tool's output or an error) are shown as ``\x1b``, never sent to the terminal: the reviewer sees
the plan that runs, and no text can crash, restyle or clear the screen. Styles come only from
the CLI's own code, through :func:`styled`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
EXIT_PIPE = 141
"""The exit code when the reader of stdout left (``| head``): 128 + SIGPIPE, as a shell tool."""


def visible(text: str) -> str:
    r"""Return ``text`` with control characters (but newline and tab) written as ``\xNN``."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class LiteralConsole(Console):
    """A console whose output holds no control character but its own (styles, cursor moves)."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """Make a string printable text: literal, control characters visible (before layout)."""
        return super().render_str(visible(text), **kwargs)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        """Render as Rich does; text that reached here unchecked is made visible (a safety net)."""
        for segment in super().render(renderable, options):
            if segment.control or not CONTROL.search(segment.text):
                yield segment
            else:
                yield Segment(visible(segment.text), segment.style)

    def on_broken_pipe(self) -> None:
        """Stop quietly when the reader left (``| head``), exiting as ``--json`` does (141)."""
        self.quiet = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(EXIT_PIPE)


def console(*, stderr: bool = False) -> Console:
    """Return the console the CLI prints with: literal text, no highlighting, lines kept whole."""
    return LiteralConsole(stderr=stderr, highlight=False, soft_wrap=True, markup=False, emoji=False)


def styled(*parts: str | tuple[str, str] | Text) -> Text:
    """Return one line of literal pieces, some styled: ``styled(("error:", "red"), " ", msg)``.

    A :class:`~rich.text.Text` part is taken as made (by ``styled`` or the CLI's own code).
    """
    line = Text()
    for part in parts:
        if isinstance(part, Text):
            line.append_text(part)
        else:
            text, style = (part, "") if isinstance(part, str) else part
            line.append(visible(str(text)), style)
    return line


def one_line(text: object) -> str:
    """Return ``text`` as one line (newlines as spaces), for summaries that end at the width."""
    return " ".join(str(text).split("\n"))
