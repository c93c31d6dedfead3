"""Standard output and error with secrets scrubbed: what the CLI prints, and what tools print.

Tools run in the CLI's process and may print their environment; the CLI's own lines quote
database URLs and error messages. While a command runs, ``sys.stdout`` and ``sys.stderr``
are wrapped: each complete line is written with URL passwords masked and secret values
replaced (:func:`planexec.redaction.secrets.scrub_text`); a partial line waits for its end or a
flush.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

from planexec.redaction.secrets import scrub_text


class ScrubbingStream:
    """A text stream that scrubs whole lines before passing them on to ``target``."""

    def __init__(self, target: TextIO) -> None:
        """Wrap ``target`` (its other attributes, such as ``isatty``, are the target's)."""
        self._target = target
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        """Write the complete lines of ``text`` (scrubbed); keep a partial line for later."""
        with self._lock:
            self._pending += text
            if "\n" in self._pending:
                lines, _, self._pending = self._pending.rpartition("\n")
                self._target.write(scrub_text(lines + "\n"))
        return len(text)

    def flush(self) -> None:
        """Write a pending partial line (scrubbed) and flush the target."""
        with self._lock:
            if self._pending:
                self._target.write(scrub_text(self._pending))
                self._pending = ""
        self._target.flush()

    def __getattr__(self, name: str) -> Any:
        """Everything else (``isatty``, ``fileno``, ``encoding``...) is the target's."""
        return getattr(self._target, name)


@contextmanager
def scrubbed_stdio() -> Iterator[None]:
    """Scrub everything written to ``sys.stdout`` and ``sys.stderr`` inside the block."""
    out, err = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, ScrubbingStream(out))
    sys.stderr = cast(TextIO, ScrubbingStream(err))
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = out, err
