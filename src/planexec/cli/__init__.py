"""The ``planexec`` command: plan, approve and run tasks on your files from the terminal.

``app`` is the typer app (commands and options, light to import); the work is done on the
runs API (:mod:`planexec.runs`) by ``actions``/``listing``, shown live by ``watch`` (status,
progress, every plan that runs) and printed through ``ui``, where all text is literal.
"""

from planexec.cli.app import app, main

__all__ = ["app", "main"]
