"""The passage re-score: how much of the query one sentence of a passage holds, no model call.

The share of the query terms' IDF mass found in a passage's best sentence. Which passage of a
long document answers a question is mostly decided by such a sentence; which document ranks
first is not, so the recipe (:mod:`ragtiller.ranking.recipe`) orders passages within a
document by it, never documents.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from ragtiller.core.tiers import Tier
from ragtiller.index.lexical import LexicalTier, lucene_idf

_SENTENCE_BREAK = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+|\n\s*\n")


class SentenceCoverage:
    """Best-sentence query coverage: ``max over sentences of idf(query terms in it) / idf(query)``.

    Terms are analysed as the lexical tier analyses them (stopwords, stemmer); IDF is that
    tier's corpus statistics (Lucene's ``log(1 + (N - df + 0.5) / (df + 0.5))``) times its IDF
    among the texts scored together (the candidate passages): inside a long article every
    passage names the article's topic, and the terms that tell its passages apart are the
    rarer ones among them.

    Args:
        lexical: An embedded BM25 tier (its analysis and document frequencies are read).
    """

    def __init__(self, lexical: LexicalTier) -> None:
        self.lexical = lexical

    @classmethod
    def from_tiers(cls, tiers: Iterable[Tier]) -> SentenceCoverage | None:
        """Over the first embedded BM25 tier among ``tiers``, or None when there is none."""
        lexical = next((t for t in tiers if isinstance(t, LexicalTier)), None)
        return None if lexical is None else cls(lexical)

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """Each text's best-sentence coverage of ``query``, in [0, 1]; all 0 without query terms.

        Example:
            >>> from ragtiller.index.records import RecordTable
            >>> texts = ["Wings flutter. Panels bend.", "Panels bend and wings flutter."]
            >>> records = RecordTable(["a", "b"], texts, [{}, {}])
            >>> cover = SentenceCoverage(LexicalTier.build(records, texts))
            >>> cover.scores("wing flutter panel", texts)
            [0.6666666666666666, 1.0]
        """
        terms = set(self.lexical.query_terms(query))
        if not terms:
            return [0.0] * len(texts)
        sets = [self.lexical.term_set(text) for text in texts]
        n = len(sets)
        weights = {
            t: w * lucene_idf(sum(t in f for f in sets), n)
            for t, w in self.lexical.idf(terms).items()
        }
        total = math.fsum(weights.values())
        out: list[float] = []
        for text in texts:
            best = 0.0
            for sentence in _SENTENCE_BREAK.split(text):
                found = terms.intersection(self.lexical.term_set(sentence))
                best = max(best, math.fsum(weights[t] for t in found))
            out.append(best / total)
        return out
