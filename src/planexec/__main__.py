"""Run the planexec command: ``python -m planexec``."""

from planexec.cli import main

main()
