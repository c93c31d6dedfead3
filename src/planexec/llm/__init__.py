"""The model layer: chat models by name and every model call.

Deadlines, retries, whole replies (:mod:`planexec.llm.calls`); scrubbed calls, usage, prompts.
"""
