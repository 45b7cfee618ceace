"""Pinecone tiers configured from the environment (the key as a ``SecretStr``), with no I/O
until the first search; a host is preferred to a name, which costs a control-plane lookup."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, ConfigDict, SecretStr

from ragtiller.errors import ConfigurationError, TierUnavailable
from ragtiller.pinecone.tiers import (
    TEXT_KEY,
    PineconeLexicalTier,
    PineconeTier,
    require_langchain_pinecone,
)

if TYPE_CHECKING:
    from langchain_pinecone import PineconeVectorStore

logger = logging.getLogger("ragtiller.pinecone")

API_KEY_ENV = "PINECONE_API_KEY"
INDEX_ENV = "PINECONE_INDEX"
HOST_ENV = "PINECONE_HOST"
SPARSE_INDEX_ENV = "PINECONE_SPARSE_INDEX"
SPARSE_HOST_ENV = "PINECONE_SPARSE_HOST"


class PineconeIndexSettings(BaseModel):
    """How to reach one Pinecone index: the key (shown as ``**********``), its host or name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    api_key: SecretStr
    host: str = ""
    index_name: str = ""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], *, host_env: str, index_env: str
    ) -> PineconeIndexSettings | None:
        """The settings in ``env``; None without ``PINECONE_API_KEY``."""
        api_key = env.get(API_KEY_ENV, "").strip()
        if not api_key:
            return None
        host, index_name = env.get(host_env, "").strip(), env.get(index_env, "").strip()
        if not host and not index_name:
            raise ConfigurationError(
                f"{API_KEY_ENV} is set but neither {host_env} nor {index_env} is: set {host_env} "
                f"to the index host (see describe_index) or {index_env} to the index name"
            )
        return cls(api_key=SecretStr(api_key), host=host, index_name=index_name)

    def connect(self) -> Any:
        """A ``pinecone`` data-plane ``Index`` handle (a control-plane lookup when only named)."""
        from pinecone import Pinecone

        client = Pinecone(api_key=self.api_key.get_secret_value(), source_tag="langchain")
        return client.Index(host=self.host) if self.host else client.Index(name=self.index_name)


def pinecone_tier_from_env(
    embedder: Embeddings,
    env: Mapping[str, str] = os.environ,
    *,
    name: str = "dense",
    timeout_s: float = 5.0,
) -> PineconeTier:
    """The dense tier from ``PINECONE_API_KEY`` and ``PINECONE_HOST`` or ``PINECONE_INDEX``,
    over an index built with ``embedder``. Without the key, its searches raise
    ``TierUnavailable("no-credentials")`` (the graph reports it skipped, or falls back)."""
    connect = _connector(env, name, HOST_ENV, INDEX_ENV)

    def make_store() -> PineconeVectorStore:
        index = connect()
        from langchain_pinecone import PineconeVectorStore

        return PineconeVectorStore(index=index, embedding=embedder, text_key=TEXT_KEY)

    return PineconeTier(make_store, name=name, timeout_s=timeout_s)


def pinecone_lexical_tier_from_env(
    env: Mapping[str, str] = os.environ,
    *,
    name: str = "lexical",
    timeout_s: float = 5.0,
) -> PineconeLexicalTier:
    """The lexical tier (BM25 sparse vectors) from ``PINECONE_API_KEY`` and
    ``PINECONE_SPARSE_HOST`` or ``PINECONE_SPARSE_INDEX``: a second index, next to the dense one
    (``vector_type="sparse"``, metric ``dotproduct``). Without the key, as the dense tier."""
    connect = _connector(env, name, SPARSE_HOST_ENV, SPARSE_INDEX_ENV)
    return PineconeLexicalTier(connect, name=name, timeout_s=timeout_s)


def _connector(
    env: Mapping[str, str], name: str, host_env: str, index_env: str
) -> Callable[[], Any]:
    settings = PineconeIndexSettings.from_env(env, host_env=host_env, index_env=index_env)
    if settings is not None:
        require_langchain_pinecone()
        return settings.connect
    logger.info("tier %r: %s is not set; the Pinecone tier is skipped", name, API_KEY_ENV)
    message = (
        f"Pinecone tier {name!r}: set {API_KEY_ENV} (and {host_env} or {index_env}) to search "
        "Pinecone"
    )

    def connect() -> NoReturn:
        raise TierUnavailable("no-credentials", message)

    return connect
