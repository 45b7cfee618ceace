"""The index manifest: what an index directory holds and how it was built."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from ragtiller.index.lexical import LexicalConfig
from ragtiller.index.units import ChunkingConfig

FORMAT_VERSION: Literal[2] = 2  # bumped when a version's files change: others are rebuilt
MANIFEST_FILE = "manifest.json"

VectorDtype = Literal["float32", "float16"]  # float16 halves the memory; scores are float32
VECTOR_DTYPES: tuple[VectorDtype, ...] = ("float32", "float16")


class EmbedderInfo(BaseModel):
    """The embedder an index was built with; loading with another one is refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str  # its model_name or model attribute, or its class name
    dimension: int = Field(gt=0)


class IndexCounts(BaseModel):
    """How much the index holds: documents, parent sections, child chunks (vector rows)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    documents: int = Field(ge=0)
    sections: int = Field(ge=0)
    chunks: int = Field(ge=0)


class IndexManifest(BaseModel):
    """``manifest.json`` of an index version, written last by a save."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: Literal[2] = FORMAT_VERSION
    created_at: AwareDatetime = Field(default_factory=lambda: datetime.now(UTC))
    embedder: EmbedderInfo
    chunking: ChunkingConfig
    lexical: LexicalConfig
    counts: IndexCounts
    namespaces: tuple[str, ...]  # of the chunks, first-seen order
    tenanted: bool  # a chunk carries a tenant key: a graph over it refuses turns naming none
    embedder_variant: str | None = None  # onnx-uint8, torch-fp32, ...; None: the embedder won't say
    vector_dtype: VectorDtype = "float32"
