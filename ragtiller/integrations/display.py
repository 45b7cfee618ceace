"""Plain-text views of a turn for terminals and notebooks: the stage table and citations."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.documents import Document

from ragtiller.core.run_manifest import RunManifest


def stage_table(manifest: RunManifest) -> str:
    """One row per stage outcome: stage, status, reason, ms (tier-search once per tier)."""
    rows = [("stage", "status", "reason", "ms")]
    for stage in manifest.stages:
        tier = stage.detail.get("tier")
        name = f"{stage.step} ({tier})" if tier else stage.step
        reason = stage.reason or stage.detail.get("method") or ""
        rows.append((name, stage.status, str(reason), f"{stage.ms:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    align = (str.ljust, str.ljust, str.ljust, str.rjust)
    lines = ("  ".join(f(c, w) for f, c, w in zip(align, row, widths, strict=True)) for row in rows)
    return "\n".join(lines)


def citations(documents: Sequence[Document], *, width: int = 100) -> str:
    """``[n] source  (score)  first line`` per document, best first (a ``fused`` score alone did
    not rank them: the floor places documents by their best passage)."""
    lines = []
    for doc in documents:
        meta = doc.metadata
        first = " ".join(doc.page_content.split())[: max(0, width - 40)]
        final, fused = meta["final_score"], meta["fused_score"]
        score = f"rerank {final:.3f}" if final != fused else f"fused {fused:.3f}"
        lines.append(f"[{meta['citation']}] {meta['source'] or meta['doc_id']}  ({score})  {first}")
    return "\n".join(lines)


def rerank_outcome(manifest: RunManifest) -> str:
    """What the rerank stage did, in the stage table's words: ``done (zscore)``, ``skipped (...)``."""
    try:
        stage = manifest.stage("rerank")
    except KeyError:
        return "-"
    if stage.status == "done":
        return f"done ({manifest.rerank_method or stage.detail.get('method') or '-'})"
    return f"{stage.status} ({stage.reason or '-'})"


def summary(manifest: RunManifest) -> str:
    """Policy, route, rerank outcome, LLM calls, overrides and degradation labels."""
    parts = [
        f"policy: {manifest.policy_id}; route: {manifest.query_type}"
        + (" (broad)" if manifest.is_broad else ""),
        f"router: {manifest.router}; rerank: {rerank_outcome(manifest)}; "
        f"llm calls: {manifest.llm_calls}; total: {manifest.latency_ms.get('total', 0.0):.1f} ms",
    ]
    if manifest.overrides:
        parts.append(
            "overrides: " + ", ".join(f"{k}={v}" for k, v in sorted(manifest.overrides.items()))
        )
    if manifest.step_back.generalized:
        parts.append(f"step-back: {manifest.step_back.generalized!r}")
    if manifest.degraded:
        parts.append("degraded: " + "; ".join(manifest.degraded))
    return "\n".join(parts)
