"""The planexec command with slow scripted models: each reply waits PLANEXEC_TEST_MODEL_DELAY
seconds first (a model that takes its time, for the live status). Run as a script."""

from __future__ import annotations

import os
import sys
import time

from planexec.cli import main
from planexec.scripted import ScriptedChatModel

delay = float(os.environ.get("PLANEXEC_TEST_MODEL_DELAY", "0"))
generate = ScriptedChatModel._generate


def slow_generate(self, *args, **kwargs):
    time.sleep(delay)
    return generate(self, *args, **kwargs)


ScriptedChatModel._generate = slow_generate  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.argv[0] = "planexec"
    main()
