"""Keeping secrets out of state, checkpoints, stream events and reports.

planexec never copies credentials into state. As a second line of defence, any text a step
produces (outputs, errors, stream events) is scrubbed of the values of environment variables
whose names mark them as secrets (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``...),
so a tool that echoes its environment or an error that quotes a key does not leak it.
"""

from __future__ import annotations

import os
import re
from typing import Any

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
MIN_SECRET_LENGTH = 8
REDACTED = "[redacted]"


def secret_values() -> list[str]:
    """Return the values of secret-looking environment variables, longest first."""
    found = {
        value
        for name, value in os.environ.items()
        if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_LENGTH
    }
    return sorted(found, key=len, reverse=True)


def redact(value: Any, secrets: list[str] | None = None) -> Any:
    """Replace every secret value inside strings of a JSON-like value with ``[redacted]``."""
    known = secret_values() if secrets is None else secrets
    if not known:
        return value
    if isinstance(value, str):
        for secret in known:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {redact(k, known): redact(v, known) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, known) for v in value]
    return value
