"""The planexec command with slow scripted models: each reply waits PLANEXEC_TEST_MODEL_DELAY
seconds first (a model that takes its time, for the live status), and a streamed reply waits
PLANEXEC_TEST_CHUNK_DELAY seconds before each piece. Run as a script."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time

from planexec.cli import main
from planexec.llm.scripted import ScriptedChatModel

delay = float(os.environ.get("PLANEXEC_TEST_MODEL_DELAY", "0"))
chunk_delay = float(os.environ.get("PLANEXEC_TEST_CHUNK_DELAY", "0"))
generate, stream = ScriptedChatModel._generate, ScriptedChatModel._stream


def slow_generate(self, *args, **kwargs):
    time.sleep(delay)
    return generate(self, *args, **kwargs)


def slow_stream(self, *args, **kwargs):
    for chunk in stream(self, *args, **kwargs):
        time.sleep(chunk_delay)
        yield chunk


ScriptedChatModel._generate = slow_generate  # type: ignore[method-assign]
ScriptedChatModel._stream = slow_stream  # type: ignore[method-assign]

if __name__ == "__main__":
    # a test that waits in vain for the end sends SIGUSR1: where every thread is, on the screen
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    sys.argv[0] = "planexec"
    main()
