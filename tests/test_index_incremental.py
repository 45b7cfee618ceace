"""Incremental ingest through the one door: only what changed is embedded, the rest is reused."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from ragtiller.cli.app import main
from ragtiller.core.tiers import SearchRequest
from ragtiller.errors import IngestError
from ragtiller.index import ChunkingConfig, EmbeddedIndex, LexicalConfig
from ragtiller.index.embedded import INDEX_FILES
from ragtiller.index.versions import current_version
from ragtiller.ingest import ChangeCounts, ingest
from ragtiller.models import HashingEmbedder

CHUNKING = ChunkingConfig(chunk_tokens=12, overlap_tokens=2)
FILES = {
    "guide.md": "# Install\n\nRun pip install ragtiller to get the package and its CLI.\n\n"
    "# Quota\n\nThe ledger counts every chat call against the daily budget in UTC.\n",
    "notes.txt": "Plain notes: the gate refuses a turn when the budget is spent.\n",
    "api.rst": "API\n===\n\nCall build_graph with a policy and an index to get a graph.\n",
}


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return super().embed_documents(texts)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in FILES.items():
        (root / name).write_text(text)
    return root


def run(
    corpus: Path, index_dir: Path, embedder: HashingEmbedder, **options: object
) -> EmbeddedIndex:
    options.setdefault("chunking", CHUNKING)
    return ingest([corpus], index_dir, embedder=embedder, progress=False, **options)  # type: ignore[arg-type]


def snapshot(index: EmbeddedIndex) -> dict[str, object]:
    """Everything a search can see: chunk rows with their vectors, sections, map, BM25 hits."""
    records = index.store.records
    lexical = index.tiers[2].search(SearchRequest(query="budget graph install", vector=None, k=10))
    return {
        "chunks": sorted(
            (i, t, repr(sorted(md.items())), tuple(np.round(index.store.vectors[r], 6)))
            for r, (i, t, md) in enumerate(
                zip(records.ids, records.texts, records.metadatas, strict=True)
            )
        ),
        "parents": sorted(
            zip(
                index.parents.ids,
                index.parents.texts,
                map(repr, index.parents.metadatas),
                strict=True,
            )
        ),
        "lexical": sorted((h["id"], round(h["score"], 5)) for h in lexical),
        "counts": index.manifest.counts,
    }


def test_first_ingest_adds_everything_and_embeds_each_chunk_once(
    corpus: Path, tmp_path: Path
) -> None:
    embedder = CountingEmbedder()
    index = run(corpus, tmp_path / "idx", embedder)
    report = index.report
    assert report is not None
    chunks = index.manifest.counts.chunks
    assert report.documents == ChangeCounts(added=3)
    assert report.chunks == ChangeCounts(added=chunks)
    assert report.embedded == len(embedder.texts) == chunks
    assert report.version == "v000001"


def test_unchanged_corpus_embeds_nothing_and_writes_no_version(
    corpus: Path, tmp_path: Path
) -> None:
    run(corpus, tmp_path / "idx", CountingEmbedder())
    embedder = CountingEmbedder()
    again = run(corpus, tmp_path / "idx", embedder)
    assert again.report is not None
    assert embedder.texts == []
    assert again.report.embedded == 0
    assert again.report.documents == ChangeCounts(unchanged=3)
    assert again.report.chunks == ChangeCounts(unchanged=again.manifest.counts.chunks)
    assert again.report.version is None
    assert "index unchanged, not rewritten" in again.report.summary()
    assert current_version(tmp_path / "idx").name == "v000001"


def test_an_edit_embeds_only_new_texts_and_equals_a_fresh_build(
    corpus: Path, tmp_path: Path
) -> None:
    before = run(corpus, tmp_path / "idx", CountingEmbedder())
    (corpus / "notes.txt").write_text("Plain notes: the gate refuses a turn once quota is gone.\n")
    (corpus / "new.md").write_text("# New\n\nA brand new page about rerankers.\n")
    (corpus / "api.rst").unlink()
    embedder = CountingEmbedder()
    after = run(corpus, tmp_path / "idx", embedder)
    assert after.report is not None
    assert after.report.documents == ChangeCounts(added=1, updated=1, unchanged=1, deleted=1)
    gone = [md for md in before.store.records.metadatas if md["doc_id"] in ("notes.txt", "api.rst")]
    assert after.report.chunks == ChangeCounts(
        added=2, unchanged=before.manifest.counts.chunks - len(gone), deleted=len(gone)
    )
    assert sorted(embedder.texts) == sorted(
        [
            "Plain notes: the gate refuses a turn once quota is gone.",
            "New # New\n\nA brand new page about rerankers.",  # under its title, its H1
        ]
    )
    assert after.report.version == "v000002"
    fresh = run(corpus, tmp_path / "fresh", CountingEmbedder())
    assert snapshot(after) == snapshot(fresh)
    assert after.store.records.ids == fresh.store.records.ids  # same order as a fresh build
    assert after.corpus_map == fresh.corpus_map
    guide_ids = {
        i
        for i, md in zip(before.store.records.ids, before.store.records.metadatas, strict=True)
        if md["doc_id"] == "guide.md"
    }
    assert guide_ids <= set(after.store.records.ids)  # untouched chunks keep their ids


def test_a_moved_section_is_updated_without_embedding(corpus: Path, tmp_path: Path) -> None:
    run(corpus, tmp_path / "idx", CountingEmbedder())
    text = FILES["guide.md"].replace("# Quota", "\n\n\n# Quota")  # same text, new offsets
    (corpus / "guide.md").write_text(text)
    embedder = CountingEmbedder()
    after = run(corpus, tmp_path / "idx", embedder)
    assert after.report is not None
    assert embedder.texts == []
    assert after.report.chunks.updated >= 1
    assert after.report.documents == ChangeCounts(updated=1, unchanged=2)
    fresh = run(corpus, tmp_path / "fresh", CountingEmbedder())
    assert snapshot(after) == snapshot(fresh)


def test_incremental_cleanup_keeps_documents_not_given(corpus: Path, tmp_path: Path) -> None:
    run(corpus, tmp_path / "idx", CountingEmbedder())
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "faq.md").write_text("# FAQ\n\nQuestions about the quota ledger.\n")
    embedder = CountingEmbedder()
    after = run(extra, tmp_path / "idx", embedder, cleanup="incremental")
    assert after.report is not None
    assert after.report.documents == ChangeCounts(added=1)
    assert len(embedder.texts) == 1
    assert {md["doc_id"] for md in after.store.records.metadatas} == {
        "guide.md",
        "notes.txt",
        "api.rst",
        "faq.md",
    }
    assert after.manifest.counts.documents == 4
    assert "- guide.md" in after.corpus_map and "- FAQ" in after.corpus_map  # faq.md's H1
    reopened = EmbeddedIndex.load(tmp_path / "idx", embedder=HashingEmbedder(dim=64))
    assert snapshot(reopened) == snapshot(after)
    full = run(extra, tmp_path / "idx", CountingEmbedder(), cleanup="full")
    assert full.report is not None
    assert full.report.documents == ChangeCounts(unchanged=1, deleted=3)
    assert {md["doc_id"] for md in full.store.records.metadatas} == {"faq.md"}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {"embedder": HashingEmbedder(dim=32)},
            r"embedder changed from .*dimension 64.* to .*dimension 32",
        ),
        (
            {"chunking": ChunkingConfig(chunk_tokens=20, overlap_tokens=2)},
            r"chunking changed from chunk_tokens=12 to chunk_tokens=20",
        ),
        (
            {"chunking": ChunkingConfig(chunk_tokens=12, overlap_tokens=2, header="title")},
            r"chunking changed from header='path' to header='title'",
        ),
    ],
)
def test_another_embedder_or_chunking_rebuilds_in_full_and_says_why(
    corpus: Path, tmp_path: Path, change: dict[str, object], reason: str
) -> None:
    run(corpus, tmp_path / "idx", CountingEmbedder())
    embedder = change.pop("embedder", CountingEmbedder())
    assert isinstance(embedder, HashingEmbedder)
    after = run(corpus, tmp_path / "idx", embedder, **change)
    assert after.report is not None
    assert after.report.rebuild_reason is not None
    assert after.report.chunks.added == after.manifest.counts.chunks
    assert after.report.embedded == after.manifest.counts.chunks
    assert re.search(reason, after.report.summary())
    assert "full rebuild: " in after.report.summary()
    with pytest.raises(IngestError, match="cannot ingest incrementally"):
        run(corpus, tmp_path / "idx", CountingEmbedder(), cleanup="incremental")


def test_lexical_settings_change_rewrites_without_embedding(corpus: Path, tmp_path: Path) -> None:
    run(corpus, tmp_path / "idx", CountingEmbedder())
    embedder = CountingEmbedder()
    after = run(corpus, tmp_path / "idx", embedder, lexical=LexicalConfig(k1=1.2))
    assert after.report is not None
    assert embedder.texts == []
    assert after.report.version == "v000002"
    assert after.manifest.lexical.k1 == 1.2


def test_an_unreadable_previous_index_is_rebuilt_with_the_reason(
    corpus: Path, tmp_path: Path
) -> None:
    run(corpus, tmp_path / "idx", CountingEmbedder())
    np.save(current_version(tmp_path / "idx") / "vectors.npy", np.full((1, 64), np.nan, np.float32))
    after = run(corpus, tmp_path / "idx", CountingEmbedder())
    assert after.report is not None
    assert after.report.rebuild_reason is not None
    assert after.report.rebuild_reason.startswith("the index there could not be opened")
    assert EmbeddedIndex.load(tmp_path / "idx", embedder=HashingEmbedder(dim=64))


def test_cli_prints_one_summary_line_with_the_same_counts(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["ingest", str(corpus), "--index", str(tmp_path / "idx"), "--embedder", "hashing"]
    args += ["--chunk-tokens", "12", "--overlap-tokens", "2", "--quiet"]
    assert main(args) == 0
    first = capsys.readouterr().out.strip().splitlines()
    (corpus / "notes.txt").write_text("Edited notes.\n")
    assert main(args) == 0
    second = capsys.readouterr().out.strip().splitlines()
    assert len(first) == len(second) == 1
    assert first[0].endswith("embedded 7 texts; saved as v000001")
    assert (
        "documents: 0 added, 1 updated, 2 unchanged, 0 deleted; chunks: 1 added, 0 updated, "
        "6 unchanged, 1 deleted; embedded 1 text; saved as v000002"
    ) in second[0]


def test_one_progress_bar_covers_every_stage_with_counts(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = ingest([corpus], tmp_path / "idx", embedder=HashingEmbedder(dim=64), chunking=CHUNKING)
    err = capsys.readouterr().err
    chunks = index.manifest.counts.chunks
    for stage in ("read 1/5", "chunk 2/5", "embed 3/5", "index 4/5", "save 5/5"):
        assert f"ingest {stage}" in err
    assert (
        f"read 3, chunk 3, embed {chunks}, index {chunks}, save {len(INDEX_FILES)}"
        in err.split("ingest done")[-1]
    )
    assert "embedding" not in err  # no second bar of its own
