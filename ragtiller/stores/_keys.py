"""Cache keys that do not care about case or spacing."""

from __future__ import annotations

import hashlib


def cache_key(*parts: str) -> str:
    """A stable cache key for ``parts``.

    Each part is casefolded, its whitespace collapsed to single spaces and stripped; the parts are
    joined by the unit separator (``\\x1f``) and hashed, so no query text reaches the store.

    Returns:
        The SHA-256 hex digest (64 characters).

    Example:
        >>> a = cache_key("step-back", "  How do I   START? ")
        >>> a == cache_key("Step-Back", "how do i start?")
        True
    """
    normalized = "\x1f".join(" ".join(part.casefold().split()) for part in parts)
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()
