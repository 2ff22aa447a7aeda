"""URLs in an escaped line made into links (torch's documentation pages in a
hint or a graph break's line): the one regular expression of the views."""

from __future__ import annotations

import re

_URL = re.compile(r"(https?://[^\s<>&\"']+)")


def _linked(escaped: str) -> str:
    """Links in an escaped line made clickable (torch's documentation pages)."""
    return _URL.sub(r'<a href="\1" target="_blank" rel="noopener">\1</a>', escaped)
