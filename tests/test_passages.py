"""Passages answer, documents rank: what a turn returns is a bounded passage of a ranked document.

Regression tests for issue 25: whole sections came back as "passages", a document showed one
text however many of its passages matched, pre-split Documents sharing a source came back as
one result, and fewer results than asked came back with no label.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from fixtures.fakes import StaticTier, hit
from langchain_core.documents import Document

from ragtiller import InputError, build_graph, load_policy
from ragtiller.core.tiers import Candidate, Hit
from ragtiller.eval.variants import with_depth, with_overrides
from ragtiller.index import EmbeddedIndex
from ragtiller.index.lexical import LexicalConfig, LexicalTier, analyze
from ragtiller.index.records import RecordTable
from ragtiller.ingest import build_index
from ragtiller.integrations.langchain import as_retriever
from ragtiller.models import HashingEmbedder
from ragtiller.nodes.assemble import choose_passages, fit_context
from ragtiller.policies.schema import BudgetsConfig
from ragtiller.ranking import recipe
from ragtiller.ranking.recipe import CandidateTable, SentenceCoverage, interleave

EMBEDDER = HashingEmbedder(dim=256)


def words(n: int, prefix: str) -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def article(title: str, paragraphs: list[str]) -> Document:
    return Document(
        page_content=f"# {title}\n\n" + "\n\n".join(paragraphs), metadata={"source": f"{title}.md"}
    )


# One long Markdown file with one heading: the shape that returned whole articles.
LONG = article(
    "Rivers",
    [
        "The Rhine rises in the Swiss Alps and flows to the North Sea. " + words(60, "r"),
        "Its delta in the Netherlands joins the Meuse near Rotterdam. " + words(60, "d"),
        "Castles line the Middle Rhine gorge between Bingen and Koblenz. " + words(60, "c"),
        "Barges carry coal and grain upstream to Basel. " + words(60, "b"),
    ],
)
OTHER = article("Mountains", ["The Alps are the highest range in Europe. " + words(40, "m")])


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    return build_index([LONG, OTHER], embedder=EMBEDDER, progress=False)


def ask(index: EmbeddedIndex, query: str, policy: Any = None, **context: Any) -> dict[str, Any]:
    graph = build_graph(policy, index=index)
    return graph.invoke({"query": query}, context=context or None)  # type: ignore[no-any-return]


def test_a_returned_document_is_a_passage_never_the_whole_section(index: EmbeddedIndex) -> None:
    assert index.manifest.counts.sections == 2  # one heading each: the article is one section
    out = ask(index, "Which castles line the Middle Rhine gorge?", top_k=5)
    bound = index.manifest.chunking.chunk_tokens
    window = load_policy().budgets.window_words
    assert out["documents"]
    for doc in out["documents"]:
        assert len(doc.page_content.split()) <= max(bound, window)
        assert doc.page_content != LONG.page_content.strip()


def test_the_matching_passage_of_the_right_document_comes_first(index: EmbeddedIndex) -> None:
    # Words that appear in one paragraph of Rivers.md only: that paragraph answers.
    out = ask(index, "Which castles line the Middle Rhine gorge between Bingen and Koblenz?")
    first = out["documents"][0]
    assert first.metadata["source"] == "Rivers.md"
    assert "Castles line the Middle Rhine gorge" in first.page_content


def test_a_document_gives_several_passages_up_to_passages_per_document(
    index: EmbeddedIndex,
) -> None:
    policy = with_overrides(load_policy(), {"budgets.passages_per_document": 2})
    out = ask(index, "the Rhine delta castles barges Basel", policy, top_k=5)
    sources = [d.metadata["source"] for d in out["documents"]]
    assert sources.count("Rivers.md") == 2
    labels = out["manifest"].notes
    assert any("over passages_per_document 2" in label for label in labels), labels
    assert out["manifest"].degraded == []  # a shortfall is a note: nothing went wrong


def test_pre_split_documents_sharing_a_source_stay_passages() -> None:
    texts = [
        f"Section {i} of the handbook covers topic{i} and more. " + words(8, f"t{i}x")
        for i in range(11)
    ]
    splits = [Document(page_content=t, metadata={"source": "handbook.pdf"}) for t in texts]
    index = build_index(splits, embedder=EMBEDDER, progress=False)
    assert index.report is not None
    assert (index.report.documents.added, index.report.chunks.added) == (1, 11)
    assert index.manifest.counts.documents == 1  # one document, 11 passages
    policy = with_overrides(load_policy(), {"budgets.passages_per_document": 5})
    out = ask(index, "what does the handbook cover about topic3", policy, top_k=5)
    assert len(out["documents"]) == 5
    assert len({d.page_content for d in out["documents"]}) == 5
    assert out["manifest"].top_k["final"] == 5


def test_fewer_passages_than_asked_says_why(index: EmbeddedIndex) -> None:
    out = ask(index, "Rhine Alps", top_k=12)
    found = len(out["documents"])
    assert found < 12
    assert any(
        label.startswith(f"assemble: {found} of 12 passages") for label in out["manifest"].notes
    ), out["manifest"].notes
    assert out["manifest"].notes[0] in out["context"]


def test_the_context_stays_within_its_budget_and_names_what_it_left_out(
    index: EmbeddedIndex,
) -> None:
    policy = with_overrides(load_policy(), {"budgets.context_words": 150})
    out = ask(index, "the Rhine delta castles barges Basel", policy, top_k=5)
    shown = [d for d in out["documents"] if d.metadata["in_context"]]
    assert sum(len(d.page_content.split()) for d in shown) <= 150
    assert len(out["documents"]) == 5 > len(shown)  # the budget bounds the context, not the list
    for d in out["documents"]:
        assert (f"[{d.metadata['citation']}] " in out["context"]) == d.metadata["in_context"]
    labels = [label for label in out["manifest"].notes if label.startswith("context budget")]
    assert labels and "left out" in labels[0]
    assert labels[0] in out["context"]


@pytest.mark.parametrize(
    "text",
    ["鍵の回転方法を説明します。" * 2_000, "x" * 2_000_000],
    ids=["cjk-without-spaces", "one-2-MB-token"],
)
def test_the_context_budget_bounds_text_without_spaces(text: str) -> None:
    """A budget in words bounds the context in every script: a CJK character counts as a word,
    and a run without spaces as one word per 20 characters."""
    tier = StaticTier("dense", [hit("dense", "long", 0.9, text=text)])
    policy = with_overrides(load_policy(), {"budgets.context_words": 1500})
    out = build_graph(policy, require_tenant=False, tiers=[tier], embedder=EMBEDDER).invoke(
        {"query": "how do I rotate the keys?"}
    )
    assert len(out["context"]) < 1500 * 20 + 2_000
    assert any("passage 1 cut from" in label for label in out["manifest"].notes)


# --- the mechanisms, on hand-made hits ----------------------------------------------------


def cand(id_: str, doc: str) -> Candidate:
    return Candidate(
        id=id_, text=id_, doc_id=doc, parent_id=None, source=doc, metadata={},
        tier_scores={}, tier_ranks={}, tier_z={}, fused_score=0.0,
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(10))
def test_interleave_keeps_every_passage_once_and_ranks_documents_as_told(seed: int) -> None:
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(rng.randint(1, 5))]
    passages = [cand(f"p{i}", rng.choice(docs)) for i in range(rng.randint(1, 12))]
    present = list(dict.fromkeys(p["doc_id"] for p in passages))
    order = [("", d) for d in rng.sample(present, len(present))]
    out = interleave(passages, order)
    assert sorted(p["id"] for p in out) == sorted(p["id"] for p in passages)
    assert list(dict.fromkeys(("", p["doc_id"]) for p in out)) == order
    for doc in present:  # within a document, the fused order stands
        mine = [p["id"] for p in passages if p["doc_id"] == doc]
        assert [p["id"] for p in out if p["doc_id"] == doc] == mine


def test_interleave_fills_a_documents_positions_with_its_best_passages() -> None:
    passages = [cand("a1", "A"), cand("b1", "B"), cand("a2", "A"), cand("a3", "A")]
    best_last = lambda group: list(reversed(group))  # noqa: E731
    out = interleave(passages, [], best_last)
    assert [p["id"] for p in out] == ["a3", "b1", "a2", "a1"]  # positions kept, A re-ordered


def test_sentence_coverage_is_the_best_sentences_share_of_query_idf() -> None:
    texts = ["Rivers flood. Castles stand on hills.", "Castles and rivers and hills."]
    tier = LexicalTier.build(RecordTable(["a", "b"], texts, [{}, {}]), texts)
    idf = tier.idf(["castl", "river", "hill"])
    assert len(set(idf.values())) == 1  # each term is in both texts
    assert SentenceCoverage(tier).scores("castles on rivers", texts) == pytest.approx([0.5, 1.0])
    assert SentenceCoverage(tier).scores("the of", texts) == [0.0, 0.0]


def test_rescore_reorders_passages_within_a_document_only() -> None:
    texts = {
        "a1": "Rivers and rivers.",
        "a2": "Which castle guards the gorge? The castle at Bingen guards the gorge.",
        "b1": "A castle.",
        "c1": "Nothing here.",
        "d1": "Nor here.",
    }
    docs = {"a1": "A", "a2": "A", "b1": "B", "c1": "C", "d1": "D"}
    records = RecordTable(list(texts), list(texts.values()), [{} for _ in texts])
    cover = SentenceCoverage(LexicalTier.build(records, list(texts.values())))

    def h(tier: str, id_: str, score: float) -> Hit:
        return hit(tier, id_, score, text=texts[id_], doc_id=docs[id_], parent_id="s")

    scores = {"a1": 0.9, "b1": 0.89, "a2": 0.88, "c1": 0.2, "d1": 0.1}
    table = CandidateTable({"dense": [h("dense", i, s) for i, s in scores.items()]})
    how: dict[str, Any] = {"method": "zscore", "rrf_k": 60, "weights": None}
    placed = recipe.place(table, recipe.fuse(table, **how), **how)
    plain = recipe.narrow(placed, 10)
    assert [c["id"] for c in plain] == list(scores)
    scored = recipe.rescore(placed, "castle gorge Bingen", cover, depth=10)
    cut = recipe.narrow(scored, 10)
    assert [c["id"] for c in cut] == ["a2", "b1", "a1", "c1", "d1"]  # A keeps positions 1, 3
    assert cut[0]["metadata"]["passage_rescore"] == pytest.approx(1.0)


def test_fit_context_leaves_out_what_does_not_fit_and_cuts_an_oversized_first() -> None:
    long_first = [cand("a", "A"), cand("b", "B")]
    long_first[0]["text"] = words(20, "w")
    kept, label = fit_context(long_first, 10)
    assert [len(c["text"].split()) for c in kept] == [10]
    assert label == (
        "context budget 10 words: passage 1 cut from 20 to 10 words; "
        "left out 1 of 2 passages (rank 2; 1 words)"
    )
    assert fit_context(long_first[1:], 10) == (long_first[1:], None)


def test_choose_passages_caps_each_document_and_labels_the_shortfall() -> None:
    ranked = [cand(f"a{i}", "A") for i in range(4)] + [cand("b0", "B")]
    chosen, _, labels = choose_passages(ranked, 5, BudgetsConfig(passages_per_document=2))
    assert [c["id"] for c in chosen] == ["a0", "a1", "b0"]
    assert labels == [
        "assemble: 3 of 5 passages: only 3 distinct passage(s) matched; "
        "2 more over passages_per_document 2"
    ]
    chosen, _, labels = choose_passages(ranked, 3, BudgetsConfig(passages_per_document=2))
    assert [c["id"] for c in chosen] == ["a0", "a1", "b0"] and labels == []


def test_windows_and_the_children_inside_them_are_not_both_returned() -> None:
    window = cand("c1+window", "A")
    window["metadata"]["child_ids"] = ["c0", "c1", "c2"]
    inside, outside = cand("c2", "A"), cand("c5", "A")
    chosen, _, _ = choose_passages([window, inside, outside], 3, BudgetsConfig())
    assert [c["id"] for c in chosen] == ["c1+window", "c5"]
    chosen, _, _ = choose_passages([inside, window, outside], 3, BudgetsConfig())
    assert [c["id"] for c in chosen] == ["c2", "c5"]


@pytest.mark.parametrize("stemmer", ["english", None])
def test_term_set_is_the_analysis_bm25_sees(stemmer: str | None) -> None:
    texts = ["Running the tests, don't they?", "The Rhine's delta: 1,000 km2 — fast!", "", "a I"]
    config = LexicalConfig(stemmer=stemmer)
    tier = LexicalTier.build(RecordTable(["x"], ["some words"], [{}]), ["some words"], config)
    for text in texts:
        assert tier.term_set(text) == frozenset(analyze([text], config)[0])


def test_eval_depth_ranks_documents_without_a_context_budget() -> None:
    deep = with_depth(load_policy(), 100)
    assert deep.budgets.passages_per_document == 1 and deep.budgets.context_words is None
    assert deep.routes["factual_lookup"].top_k == deep.budgets.max_chunks == 100
    passages = with_depth(load_policy(), 20, per_document=None)
    assert passages.budgets.passages_per_document == load_policy().budgets.passages_per_document


def test_local_coverage_weighs_the_terms_that_tell_the_candidates_apart() -> None:
    # "Broncos" is rare in the corpus but in most passages of its article; "practice" is
    # commoner in the corpus but in one passage of the article: the one that answers.
    article = [
        "The Broncos won the title. Fans cheered the Broncos.",
        "They practiced at Stanford before the game.",
        "Broncos coaches and Broncos players flew west.",
    ]
    others = [f"Choir practice number {i} ran late." for i in range(6)]
    others += [f"Unrelated filler text number {i}." for i in range(12)]
    texts = article + others
    tier = LexicalTier.build(RecordTable([str(i) for i in range(len(texts))], texts,
                                         [{} for _ in texts]), texts)  # fmt: skip
    idf = tier.idf(["bronco", "practic"])
    assert idf["bronco"] > idf["practic"]  # the corpus alone prefers the topic word
    query = "broncos practice"
    local = SentenceCoverage(tier).scores(query, article)
    assert local[1] > local[0] and local[1] > local[2]  # local weights: the answer wins


def test_k_means_k_up_to_its_hard_maximum() -> None:
    """Issue 44, item 3: ``as_retriever(graph, k=30)`` returned 11 documents, capped by
    ``budgets.max_chunks`` (12) and then by the context's word budget."""
    docs = [
        Document(
            page_content=f"Queue {n} leases each job for {n} seconds.\n\n"
            f"A job of queue {n} is retried with exponential backoff after its lease ends.",
            metadata={"id": f"queue-{n}"},
        )
        for n in range(40)
    ]
    index = build_index(docs, embedder=HashingEmbedder(), progress=False)
    graph = build_graph(index=index)
    found = as_retriever(graph, k=30).invoke("how long is a job leased by a queue?")
    assert len(found) == 30 and len({d.id for d in found}) == 30
    out = graph.invoke({"query": "how long is a job leased by a queue?"}, context={"top_k": 100})
    assert len(out["documents"]) == len(index.store.records.ids)  # every passage of the index
    with pytest.raises(InputError, match="top_k"):
        graph.invoke({"query": "how long is a job leased?"}, context={"top_k": 101})
