"""Secrets never leave: scrubbed values, untraced calls, scrubbed standard streams.

:mod:`~planexec.redaction.secrets` (what counts as a secret, and scrubbing it out of any value),
:mod:`~planexec.redaction.untraced` (a tool's real call, seen by no tracer; its stand-in run),
:mod:`~planexec.redaction.stdio` (the CLI's stdout and stderr, scrubbed line by line).
"""
