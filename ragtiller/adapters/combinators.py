"""Tiers made of other tiers: one that cannot run (:class:`UnavailableTier`), one with a fallback.

They know nothing of any backend, so the embedded and remote (Pinecone) paths share them.
"""

from __future__ import annotations

import logging
from typing import Any

from ragtiller.core.tiers import Hit, SearchRequest, Tier
from ragtiller.errors import TierUnavailable

logger = logging.getLogger("ragtiller.adapters.combinators")


class UnavailableTier:
    """A tier that cannot run, for a known reason: every search raises :class:`TierUnavailable`.

    The graph reports such a tier as ``skipped`` with the reason (e.g. ``no-credentials``).

    Args:
        name: The tier's name.
        reason: The short reason shown in the stage event.
        message: The longer explanation, with the remedy.
        needs_vector: Whether the tier it stands for reads the query vector.

    Example:
        >>> tier = UnavailableTier("dense", "no-credentials", "set PINECONE_API_KEY")
        >>> tier.search(SearchRequest(query="q", vector=None, k=1))
        Traceback (most recent call last):
        ...
        ragtiller.errors.TierUnavailable: set PINECONE_API_KEY
    """

    def __init__(self, name: str, reason: str, message: str, *, needs_vector: bool = True) -> None:
        self.name = name
        self.reason = reason
        self.message = message
        self.needs_vector = needs_vector

    def search(self, request: SearchRequest) -> list[Hit]:
        """Raise :class:`TierUnavailable`.

        Raises:
            TierUnavailable: Always, with this tier's reason.
        """
        raise TierUnavailable(self.reason, self.message)

    async def asearch(self, request: SearchRequest) -> list[Hit]:
        """Raise :class:`TierUnavailable`.

        Raises:
            TierUnavailable: Always, with this tier's reason.
        """
        raise TierUnavailable(self.reason, self.message)


class FallbackTier:
    """Serve from ``primary``; when it raises one of ``fallback_on``, serve from ``fallback``.

    Typical use: Pinecone first, the embedded tier of the same name when Pinecone has no
    credentials. Every hit's ``metadata["served_by"]`` names the tier that served it
    (``primary_label`` or ``fallback_label``); hits served by the fallback also carry
    ``metadata["fallback_reason"]``, the :class:`TierUnavailable` reason or the exception's
    class name. By default only :class:`TierUnavailable` (a known, expected absence) falls
    back: an outage of a configured primary still raises, so the graph reports it as an
    error, unless its type is listed in ``fallback_on``. An error of the fallback itself
    propagates.

    Args:
        primary: The tier tried first.
        fallback: The tier used when ``primary`` raises one of ``fallback_on``.
        name: The tier's name; default: the primary's.
        primary_label: ``served_by`` value of the primary's hits.
        fallback_label: ``served_by`` value of the fallback's hits.
        fallback_on: Exception types that send the search to the fallback.

    Example:
        >>> primary = UnavailableTier("dense", "no-credentials", "no key")
        >>> backup = UnavailableTier("dense", "offline", "no index either")
        >>> tier = FallbackTier(primary, backup)
        >>> tier.search(SearchRequest(query="q", vector=None, k=1))
        Traceback (most recent call last):
        ...
        ragtiller.errors.TierUnavailable: no index either
    """

    def __init__(
        self,
        primary: Tier,
        fallback: Tier,
        *,
        name: str | None = None,
        primary_label: str = "primary",
        fallback_label: str = "fallback",
        fallback_on: tuple[type[Exception], ...] = (TierUnavailable,),
    ) -> None:
        self.primary = primary
        self.fallback = fallback
        self.name = name or primary.name
        self.needs_vector = primary.needs_vector or fallback.needs_vector
        self.primary_label = primary_label
        self.fallback_label = fallback_label
        self.fallback_on = fallback_on

    def search(self, request: SearchRequest) -> list[Hit]:
        """The primary's hits, or the fallback's when the primary raised one of ``fallback_on``.

        Raises:
            Exception: Whatever the fallback raises, or the primary raises outside
                ``fallback_on``.
        """
        try:
            return _served_by(self.primary.search(request), self.primary_label)
        except self.fallback_on as e:
            self._log(e)
            return _served_by(self.fallback.search(request), self.fallback_label, _reason(e))

    async def asearch(self, request: SearchRequest) -> list[Hit]:
        """Async twin of :meth:`search`."""
        try:
            return _served_by(await self.primary.asearch(request), self.primary_label)
        except self.fallback_on as e:
            self._log(e)
            hits = await self.fallback.asearch(request)
            return _served_by(hits, self.fallback_label, _reason(e))

    def _log(self, error: Exception) -> None:
        logger.info(
            "tier %r: %s unavailable (%s), serving from %s",
            self.name,
            self.primary_label,
            _reason(error),
            self.fallback_label,
        )


def _served_by(hits: list[Hit], label: str, reason: str | None = None) -> list[Hit]:
    extra: dict[str, Any] = {"served_by": label}
    if reason is not None:
        extra["fallback_reason"] = reason
    return [{**hit, "metadata": {**hit["metadata"], **extra}} for hit in hits]


def _reason(error: Exception) -> str:
    return error.reason if isinstance(error, TierUnavailable) else type(error).__name__


__all__ = ("FallbackTier", "UnavailableTier")
