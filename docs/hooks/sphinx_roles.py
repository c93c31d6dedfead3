"""MkDocs hook: show the docstrings' Sphinx cross-reference roles as plain code.

planexec's docstrings write references the Sphinx way (:class:`ToolError`,
:mod:`~planexec.review.decisions`); Markdown keeps the role's name as text before the code.
This drops the role, and a leading ``~`` keeps only the last dotted name, as Sphinx shows it.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):(<code>)(~?)([^<]*)")


def _plain(match: re.Match[str]) -> str:
    code, tilde, name = match.groups()
    return code + (name.rsplit(".", 1)[-1] if tilde else name)


def on_page_content(html: str, **_: Any) -> str:
    """Drop Sphinx roles from a rendered page (only the API reference has any)."""
    return ROLE.sub(_plain, html)
