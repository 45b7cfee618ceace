"""Document ids are unique per namespace: two files never share one, so neither can replace or
delete the other's chunks (the sync groups chunks by namespace and document id)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ragtiller.errors import IngestError
from ragtiller.index.records import namespace_of

if TYPE_CHECKING:
    from ragtiller.index.units import SourceDocument

DOCUMENT_ORIGIN = "LangChain Documents"
"""The origin of every ``Document``: Documents sharing an id are passages of one document."""
_SHOWN = 3


def check_unique(documents: Iterable[tuple[SourceDocument, str]]) -> None:
    """Refuse a document id that two origins (a file, a BEIR line, Documents) give."""
    first: dict[tuple[str, str], str] = {}
    clashes: list[str] = []
    for doc, origin in documents:
        owner = first.setdefault((doc.namespace, doc.doc_id), origin)
        if owner != origin:
            clashes.append(f"{_named(doc.doc_id, doc.namespace)} by {owner} and by {origin}")
    if clashes:
        raise IngestError(
            f"{len(clashes)} document id(s) are given by more than one source, but ids must be "
            f"unique per namespace: {_listed(clashes)}; a file's id is its path under the "
            "directory ingested and a BEIR record's is its _id: rename the files or ids, or "
            "ingest them into separate namespaces or indexes"
        )


def check_against_index(
    documents: Iterable[SourceDocument], indexed: Iterable[Mapping[str, Any]]
) -> None:
    """Refuse, incrementally, a BEIR record whose id is indexed from another corpus file (it
    would replace that record); a file's id is its document, Documents the caller's to name."""
    stored: dict[tuple[str, str], str] = {}
    for md in indexed:
        stored.setdefault((namespace_of(md), str(md.get("doc_id"))), str(md.get("source", "")))
    clashes: list[str] = []
    for doc in documents:
        old = stored.get((doc.namespace, doc.doc_id))
        if old is None or old == doc.source:
            continue
        if None not in (_corpus_of(old, doc.doc_id), _corpus_of(doc.source, doc.doc_id)):
            clashes.append(
                f"{_named(doc.doc_id, doc.namespace)} is indexed from {old}, and {doc.source} gives it too"
            )
    if clashes:
        raise IngestError(
            f"{len(clashes)} record id(s) are already indexed from another corpus file, and an "
            f"incremental ingest would replace those records: {_listed(clashes)}; ids must be "
            "unique per namespace: rename the ids, or ingest every file together with cleanup "
            "'full' (the index then holds exactly those files)"
        )


def _corpus_of(source: str, doc_id: str) -> str | None:
    suffix = f"#{doc_id}"
    return source[: -len(suffix)] if source.endswith(suffix) else None


def _named(doc_id: str, namespace: str) -> str:
    return f"{doc_id!r} (namespace {namespace!r})"


def _listed(clashes: list[str]) -> str:
    more = len(clashes) - _SHOWN
    return "; ".join(clashes[:_SHOWN]) + (f"; and {more} more" if more > 0 else "")
