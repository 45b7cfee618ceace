"""Rocchio's fused first pass picks the same feedback documents in every process.

Two documents that tie in the fused first pass were ordered as a set of their keys iterates,
and string hashes are randomised per process (``PYTHONHASHSEED``): the feedback document, and
so the moved query and the whole ranking, could change from one run of ``ragtiller eval`` to
the next. Ties now keep the dense first pass's order.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
from ragtiller.core.tiers import SearchRequest
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.lexical import LexicalTier
from ragtiller.models import HashingEmbedder
from ragtiller.policies.schema import FusionConfig
from ragtiller.ranking.feedback import fused_feedback_rows

emb = HashingEmbedder(64)
texts = ["wing flutter panel", "wing flutter panel", "shock tube heat"]
texts += [f"filler document {i} about nothing" for i in range(6)]
store = NumpyVectorStore.from_texts(
    texts, emb, metadatas=[{"doc_id": f"d{i}"} for i in range(len(texts))]
)
lexical = LexicalTier.build(store.records, texts)
query = "wing flutter panel"
request = SearchRequest(query=query, vector=emb.embed_query(query), k=5)
print(fused_feedback_rows(store, lexical, request, FusionConfig(method="{method}"), docs=1))
"""


@pytest.mark.parametrize("method", ["zscore", "rrf", "minmax"])
def test_tied_documents_give_the_same_feedback_whatever_the_hash_seed(method: str) -> None:
    picked = set()
    for seed in range(6):
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        out = subprocess.run(
            [sys.executable, "-c", PROBE.replace("{method}", method)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        picked.add(out.stdout.strip())
    # rows 0 and 1 hold the same text: both passes tie them, and the dense pass lists row 0 first
    assert picked == {"[0]"}
