"""No chunk is larger than the chunking bound whatever the input, and repeated text costs one hash
per repeat (ids as before: a counter from 0 mixed into the hash)."""

from __future__ import annotations

import base64
import hashlib
import json
import random
from pathlib import Path

import pytest

from ragtiller.cli.app import main
from ragtiller.index import ChunkingConfig, SourceDocument
from ragtiller.index.units import MAX_TOKEN_CHARS
from ragtiller.ingest import chunk_documents
from ragtiller.ingest import chunking as chunking_module
from ragtiller.ingest.chunking import token_windows

SMALL = ChunkingConfig(chunk_tokens=20, overlap_tokens=5)


def hostile_texts() -> dict[str, str]:
    rng = random.Random(7)
    blob = base64.b64encode(rng.randbytes(300_000)).decode()
    words = " ".join(rng.choice(["alpha", "beta", "gamma"]) for _ in range(500))
    return {
        "one long token": blob,
        "a data uri in prose": f"The logo follows. data:image/png;base64,{blob} End of the logo.",
        "minified code lines": "\n".join(
            f"var a{i}=" + "x" * rng.randint(50, 5000) for i in range(60)
        ),
        "huge whitespace gaps": (" " * 50_000).join(["first", "second", "third", words]),
        "newline floods": "\n".join(words.split()[:50]) + "\n" * 200_000 + words,
        "mixed lengths": " ".join(
            "y" * rng.choice([1, 99, 100, 101, 250, 3000]) for _ in range(400)
        ),
    }


@pytest.mark.parametrize("config", [SMALL, ChunkingConfig()], ids=["20/5", "default"])
@pytest.mark.parametrize("name", list(hostile_texts()))
def test_every_chunk_is_within_the_bound_and_every_character_is_covered(
    name: str, config: ChunkingConfig
) -> None:
    text = hostile_texts()[name]
    _, chunks = chunk_documents([SourceDocument("d", text, "d")], config)
    most = config.chunk_tokens * MAX_TOKEN_CHARS
    assert chunks
    covered = bytearray(len(text))
    for chunk in chunks:
        assert len(chunk.text) <= most, name
        pieces = sum(-(-len(word) // MAX_TOKEN_CHARS) for word in chunk.text.split())
        assert pieces <= config.chunk_tokens, name
        start = chunk.section.start + chunk.start
        covered[start : start + len(chunk.text)] = b"\x01" * len(chunk.text)
    missing = [i for i, c in enumerate(text) if not c.isspace() and not covered[i]]
    assert missing == [], f"{name}: {len(missing)} characters in no chunk"


def test_a_long_token_is_cut_into_pieces_that_count_as_tokens() -> None:
    text = "short " + "z" * 250 + " tail"
    pieces = [
        text[s:e] for s, e in token_windows(text, ChunkingConfig(chunk_tokens=2, overlap_tokens=0))
    ]
    assert pieces == ["short " + "z" * 100, "z" * 100 + "z" * 50, "tail"]


def test_windows_of_ordinary_text_are_unchanged() -> None:
    words = [f"w{i}" for i in range(100)]
    text = " ".join(words)
    windows = [text[s:e].split() for s, e in token_windows(text, SMALL)]
    assert windows[0] == words[:20] and windows[1] == words[15:35]  # exactly 5 shared
    assert windows[-1][-1] == "w99"


def reference_id(*parts: str, repeat: int) -> str:
    """The id definition: sha256 of the parts (and the repeat counter from the first repeat)."""
    key = "\x1f".join((*parts, str(repeat)) if repeat else parts)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def test_repeated_chunks_get_the_ids_counting_from_zero_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    paragraph = " ".join(f"word{i}" for i in range(20))
    repeats = 400
    doc = SourceDocument("doc.txt", "\n\n".join([paragraph] * repeats), "doc.txt")
    real = hashlib.sha256
    calls = 0

    def counting(data: bytes = b"") -> hashlib._Hash:
        nonlocal calls
        calls += 1
        return real(data)

    monkeypatch.setattr(chunking_module.hashlib, "sha256", counting)
    sections, chunks = chunk_documents([doc], ChunkingConfig(chunk_tokens=20, overlap_tokens=0))
    monkeypatch.undo()
    assert len(chunks) == repeats and len(sections) == 1
    assert [c.id for c in chunks] == [
        reference_id("chunk", "default", "doc.txt", paragraph, repeat=r) for r in range(repeats)
    ]
    assert len({c.id for c in chunks}) == repeats
    assert calls <= 2 * (
        len(chunks) + len(sections)
    )  # was repeats * (repeats + 1) / 2 for the chunks


def test_a_huge_token_never_makes_a_huge_chunk_or_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blob = base64.b64encode(random.Random(3).randbytes(1_500_000)).decode()  # 2 MB, no whitespace
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "logo.md").write_text(
        f"# Logo\n\nThe company logo as a data URI.\n\ndata:image/png;base64,{blob}\n"
    )
    index = str(tmp_path / "idx")
    assert main(["ingest", str(docs), "--index", index, "--embedder", "hashing", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["ask", "the company logo data URI image", "--index", index, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    bound = 200 * MAX_TOKEN_CHARS
    assert payload["documents"]
    assert all(len(d["page_content"]) <= bound for d in payload["documents"])
    assert len(payload["context"]) <= len(payload["documents"]) * (bound + 200)
