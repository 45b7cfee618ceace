"""A turn's chunk vectors fetched from a remote dense tier, read as the embedded tier's are.

The embedded dense tier keeps its vectors in memory, so exact misses (``fusion.misses: exact``)
and neighbour regularization (``fusion.neighbour_weight``) read them directly. A remote tier
(Pinecone) keeps them on the server: the fuse node fetches the turn's passages once, off the
event loop and under the tier's deadline (``afetch_vectors``), and both steps read this table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragtiller.core.tiers import Scored


@dataclass(frozen=True)
class VectorTable:
    """Unit vectors of some chunks, by id.

    Attributes:
        ids: The chunk ids, parallel to ``rows``.
        rows: One unit vector per id (float32).

    Example:
        >>> table = VectorTable.of({"a": [3.0, 4.0], "b": [0.0, 2.0]})
        >>> {cid: round(s.score, 3) for cid, s in table.scores([0.0, 1.0], ["a", "b", "c"]).items()}
        {'a': 0.8, 'b': 1.0}
    """

    ids: tuple[str, ...]
    rows: npt.NDArray[np.float32]

    @classmethod
    def of(cls, vectors: Mapping[str, Sequence[float]]) -> VectorTable:
        """The table of ``vectors`` (id -> values), each scaled to unit length."""
        if not vectors:
            return cls((), np.zeros((0, 0), dtype=np.float32))
        rows = np.asarray(list(vectors.values()), dtype=np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return cls(tuple(vectors), (rows / np.where(norms > 0, norms, 1.0)).astype(np.float32))

    def vectors_of(self, ids: Sequence[str]) -> tuple[list[str], npt.NDArray[np.float32]]:
        """Those of ``ids`` the table holds, in the order given, with their rows."""
        at = {cid: i for i, cid in enumerate(self.ids)}
        found = [cid for cid in ids if cid in at]
        return found, self.rows[[at[cid] for cid in found]]

    def scores(self, vector: Sequence[float], ids: Sequence[str]) -> dict[str, Scored]:
        """The cosine of ``vector`` with each of ``ids`` the table holds (as a dense search
        scores it); ids it does not hold are left out."""
        found, block = self.vectors_of(ids)
        if not found:
            return {}
        query = np.asarray(vector, dtype=np.float32)
        query = query / (np.linalg.norm(query) or np.float32(1.0))
        cosines = np.einsum("ij,j->i", block, query).tolist()  # no BLAS threads for a few rows
        return {cid: Scored(float(c)) for cid, c in zip(found, cosines, strict=True)}


__all__ = ("VectorTable",)
