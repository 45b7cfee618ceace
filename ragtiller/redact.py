"""Provider error text is redacted before it is stored: no API key or bearer token survives."""

from __future__ import annotations

import re

_PATTERNS = (
    re.compile(r"(?i)(authorization\s*[:=]\s*)(?:bearer\s+|basic\s+)?\S+"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(
        r"(?i)((?:api[_-]?key|x-api-key|token|secret|password|key)\s*[\"']?\s*[:=]\s*[\"']?)[^\s\"'&,;]+"
    ),
    re.compile(r"()\b(?:sk|pk|rk|pcsk|co|xox[abp])[-_][A-Za-z0-9_-]{12,}"),
    re.compile(r"()\b[A-Za-z0-9+/_-]{32,}={0,2}"),
)
MASK = "[redacted]"


def redact(text: str) -> str:
    """``text`` with credentials masked: auth headers, ``key=...`` pairs, and long tokens.

    Example:
        >>> redact("401: invalid api_key=sk-abcdefghijklmnopqrstuv for Bearer abc.def.ghi123")
        '401: invalid api_key=[redacted] for Bearer [redacted]'
    """
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: f"{m.group(1)}{MASK}", text)
    return text
