"""Where code runs: planexec's one background event loop, and calls that must not wedge it.

:mod:`~planexec.concurrency.background` (the loop: sync runs' nodes and steps, model clients,
MCP sessions), :mod:`~planexec.concurrency.workers` (daemon threads a tool call runs on),
:mod:`~planexec.concurrency.offloop` (one call on a worker, awaited as a plain future),
:mod:`~planexec.concurrency.toolcalls` (a tool call there, within its time limit),
:mod:`~planexec.concurrency.abandoned` (calls that outlived their caller).
"""
