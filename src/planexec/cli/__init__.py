"""The ``planexec`` command: plan, approve and run tasks on your files from the terminal.

``app`` is the typer app (commands and options); the work is done on the runs API
(:mod:`planexec.runs`), printed by ``render``/``views`` and reviewed by ``review``.
"""

from planexec.cli.app import app, main

__all__ = ["app", "main"]
