"""Cache keys that do not care about case or spacing, for any Python str."""

from __future__ import annotations

import hashlib


def cache_key(*parts: str) -> str:
    """A stable cache key for ``parts``.

    Each part is casefolded, its whitespace collapsed to single spaces and stripped; the parts are
    joined by the unit separator (``\\x1f``, itself whitespace, so it never survives inside a part)
    and hashed, so no query text reaches the store.

    The text is encoded with ``surrogatepass``: valid text gives the same bytes as UTF-8, and a
    lone surrogate (an undecodable byte from argv or a file name, such as ``'\\udcff'``) gets its
    own three bytes instead of raising. Unlike ``surrogateescape``, this is lossless: two
    different normalized strings never encode to the same bytes.

    Returns:
        The SHA-256 hex digest (64 characters).

    Example:
        >>> a = cache_key("step-back", "  How do I   START? ")
        >>> a == cache_key("Step-Back", "how do i start?")
        True
        >>> len(cache_key("step-back", "lift \\udcff?"))
        64
    """
    normalized = "\x1f".join(" ".join(part.casefold().split()) for part in parts)
    return hashlib.sha256(normalized.encode("utf-8", "surrogatepass")).hexdigest()
