"""One turn's candidate table: every passage the tiers returned, built once by the fuse node.

The table holds what each ranking step reads: each tier's passages best first (ids and raw
scores), each passage's document, the dense tier's scores at the question's own vector when
feedback moved its search, and the dense vectors of given passages, read on demand. The steps
of :mod:`ragtiller.ranking.recipe` and :mod:`ragtiller.ranking.feedback` are pure functions of
it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from ragtiller.core.tiers import Hit
from ragtiller.ranking.documents import DocKey, doc_key

VectorSource = Callable[[Sequence[str]], tuple[list[str], npt.NDArray[np.float32]]]
"""Unit vectors of the given passage ids: those it holds, in the order given, and their rows."""


@dataclass(frozen=True)
class CandidateTable:
    """Each tier's passages, best first, and what the ranking steps read of them.

    Attributes:
        tiers: Tier name -> its hits, best first (raw scores on the tier's own scale).
        question: Tier name -> passage id -> its score at the question's own vector, for the
            tier whose search feedback moved; empty when none did.
        vectors: Reads the dense vectors of given passages; None without an embedded dense
            tier.

    Example:
        >>> hit = {"id": "a", "text": "t", "score": 1.0, "doc_id": "d", "parent_id": None,
        ...        "source": "", "metadata": {}}
        >>> table = CandidateTable({"dense": [hit]})
        >>> table.ids, table.documents
        (['a'], [('', 'd')])
    """

    tiers: Mapping[str, Sequence[Hit]]
    question: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    vectors: VectorSource | None = None

    @property
    def ids(self) -> list[str]:
        """Every passage id once, in tier order, each tier best first."""
        return list(dict.fromkeys(h["id"] for hits in self.tiers.values() for h in hits))

    @property
    def documents(self) -> list[DocKey]:
        """Every document once, in the order of :attr:`ids`."""
        return list(dict.fromkeys(doc_key(h) for hits in self.tiers.values() for h in hits))

    def head(self, depth: int) -> CandidateTable:
        """The table with each tier's best ``depth`` passages."""
        return replace(self, tiers={t: list(hits[:depth]) for t, hits in self.tiers.items()})

    def moved(
        self, tier: str, hits: Sequence[Hit], question: Mapping[str, float]
    ) -> CandidateTable:
        """The table with ``tier``'s passages replaced by a moved search's ``hits``, each also
        scored at the question's own vector (``question``)."""
        return replace(self, tiers={**self.tiers, tier: list(hits)}, question={tier: question})

    def at_question(self) -> dict[str, list[Hit]]:
        """Each tier's passages with a moved passage at its question score, re-sorted (stable)."""
        if not self.question:
            return {t: list(hits) for t, hits in self.tiers.items()}
        out = {t: list(hits) for t, hits in self.tiers.items()}
        for tier, scores in self.question.items():
            asked = [_scored(h, scores.get(h["id"], h["score"])) for h in out[tier]]
            out[tier] = sorted(asked, key=lambda h: -h["score"])
        return out


def _scored(hit: Hit, score: float) -> Hit:
    out = hit.copy()
    out["score"] = score
    return out
