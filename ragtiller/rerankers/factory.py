"""Build the rerank provider a policy asks for: a free floor, optionally under a paid ceiling."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from langchain_core.documents import BaseDocumentCompressor

from ragtiller.errors import ConfigurationError
from ragtiller.policies.evidence import read_eval_evidence
from ragtiller.policies.schema import RerankerConfig
from ragtiller.rerankers.base import Reranker
from ragtiller.rerankers.ceiling import CeilingReranker
from ragtiller.rerankers.cohere_rerank import CohereReranker
from ragtiller.rerankers.cross_encoder import CrossEncoderReranker, PairScorer
from ragtiller.rerankers.floor import IdentityReranker, ZScoreReranker
from ragtiller.stores import Cache, QuotaLedger

logger = logging.getLogger(__name__)

CrossEncoderLike = BaseDocumentCompressor | PairScorer | Reranker
"""A LangChain compressor, an object with ``predict(pairs)``, or a ready reranker."""


def reranker_from_policy(
    config: RerankerConfig,
    *,
    ledger: QuotaLedger | None = None,
    cache: Cache | None = None,
    cross_encoder: CrossEncoderLike | None = None,
    cohere: Reranker | None = None,
    env: Mapping[str, str] = os.environ,
    cache_ttl_s: int | None = None,
) -> Reranker:
    """The reranker for ``config``: the floor, wrapped in a :class:`CeilingReranker` if asked.

    Choices:

    * The floor is ``config.provider``: ``zscore``, ``identity`` or ``cross-encoder``. A paid
      provider is never a floor: ``provider: cohere`` means the z-score floor under a Cohere
      ceiling, with every ceiling rule applied.
    * ``config.ceiling: none`` (and no paid provider) returns the floor alone.
    * With ``config.require_eval_lift`` (the default), the ceiling runs only if
      ``config.ceiling_eval_artifact`` names a readable JSON file (a path relative to the
      working directory) whose ``"decision"`` is ``"promote"``. Otherwise the ceiling is still
      wrapped but disabled: every turn uses the floor and reports ``ceiling_reason:
      no-eval-lift`` with a ``ceiling_note`` saying why.
    * A missing Cohere key is not an error here: each turn reports ``no-credentials``.

    Args:
        config: The policy's reranker section.
        ledger: Daily budget with a ``rerank_calls`` limit; default: in-process.
        cache: Cache for ceiling results; default: in-process.
        cross_encoder: Model for the ``cross-encoder`` provider or ceiling.
        cohere: A ready Cohere ceiling (e.g. pointed at a test server); default: a
            :class:`CohereReranker` reading ``COHERE_API_KEY`` from ``env``.
        env: Environment the Cohere key is read from.
        cache_ttl_s: How long a ceiling's order is cached (the policy's ``cache.ttl_s``);
            None: the default policy's.

    Returns:
        A reranker that never raises.

    Raises:
        ConfigurationError: ``cross-encoder`` is asked for but ``cross_encoder`` is None, or
            ``ledger`` has no ``rerank_calls`` limit.

    Example:
        >>> from ragtiller.policies.schema import RerankerConfig
        >>> reranker_from_policy(RerankerConfig()).name
        'zscore'
        >>> ceiling = reranker_from_policy(RerankerConfig(ceiling="cohere"), env={})
        >>> ceiling.rerank("q", [], top_n=3).detail["ceiling_reason"]
        'no-eval-lift'
    """
    floor = _floor(config, cross_encoder)
    ceiling_name = "cohere" if config.provider == "cohere" else config.ceiling
    if ceiling_name == "none":
        return floor
    if ceiling_name == "cohere":
        ceiling = cohere or CohereReranker(floor=floor, env=env)
    else:
        ceiling = _cross_encoder(cross_encoder, floor)
    blocked = _missing_eval_lift(config)
    if blocked is not None:
        logger.info("rerank ceiling %r disabled: %s", ceiling.name, blocked)
    return CeilingReranker(
        ceiling,
        floor,
        config,
        ledger,
        cache,
        disabled_reason=None if blocked is None else "no-eval-lift",
        disabled_note=blocked,
        cache_ttl_s=cache_ttl_s,
    )


def _floor(config: RerankerConfig, cross_encoder: CrossEncoderLike | None) -> Reranker:
    if config.provider == "identity":
        return IdentityReranker()
    if config.provider == "cross-encoder":
        return _cross_encoder(cross_encoder, ZScoreReranker())
    return ZScoreReranker()


def _cross_encoder(model: CrossEncoderLike | None, floor: Reranker) -> Reranker:
    if model is None:
        raise ConfigurationError(
            "the policy asks for the cross-encoder reranker but no model was given; pass "
            "cross_encoder= (a LangChain BaseDocumentCompressor or a sentence-transformers "
            "CrossEncoder, from pip install 'ragtiller[export]')"
        )
    if isinstance(model, BaseDocumentCompressor | PairScorer):
        return CrossEncoderReranker(model, floor=floor)
    return model


def _missing_eval_lift(config: RerankerConfig) -> str | None:
    """Why the ceiling lacks eval evidence, or None when it has it (or none is required)."""
    if not config.require_eval_lift:
        return None
    evidence = read_eval_evidence(
        config.ceiling_eval_artifact, setting="reranker.ceiling_eval_artifact"
    )
    return None if evidence.allowed else evidence.note
