"""Eval evidence: the one reader of ``ragtiller promote`` artifacts; the writer,
:mod:`ragtiller.eval.promotion`, uses the constants defined here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

ARTIFACT_KIND = "ragtiller.promotion-decision"
ARTIFACT_SCHEMA_VERSION = 1
OVERALL_SLICE = "all"
EvalRefusal = Literal["no-eval-evidence", "eval-rejected", "eval-artifact-unreadable"]
UNREADABLE: EvalRefusal = "eval-artifact-unreadable"


@dataclass(frozen=True)
class EvalEvidence:
    """What a promote artifact says of an eval-gated component: ``reason`` None for a lift."""

    artifact: str | None
    reason: EvalRefusal | None
    note: str

    @property
    def allowed(self) -> bool:
        return self.reason is None

    def to_json(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "reason": self.reason, "note": self.note}


def read_eval_evidence(path: str | None, *, setting: str) -> EvalEvidence:
    """The eval gate at ``path`` (the policy field ``setting``): a gated component runs only on a
    ``promote`` decision with a positive NDCG@10 lift in every required slice. Never raises."""
    if not path:
        note = (
            f"{setting} is not set; run `ragtiller promote` with this component in the "
            "candidate policy and point the setting at its --out file"
        )
        return EvalEvidence(None, "no-eval-evidence", note)
    where = f"{setting} {path!r}"
    try:
        artifact = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return EvalEvidence(path, UNREADABLE, f"cannot read {where}: {type(e).__name__}: {e}")
    if not isinstance(artifact, dict):
        artifact = {}
    shape = (ARTIFACT_KIND, ARTIFACT_SCHEMA_VERSION)
    if (artifact.get("kind"), artifact.get("schema_version")) != shape:
        what = f"(kind {ARTIFACT_KIND!r}, schema_version {ARTIFACT_SCHEMA_VERSION})"
        return EvalEvidence(
            path, UNREADABLE, f"{where} is not a `ragtiller promote` decision {what}"
        )
    verdict, lifts, rules = artifact.get("decision"), artifact.get("lifts"), artifact.get("rules")
    if verdict != "promote":
        return EvalEvidence(
            path, "eval-rejected", f"{where} has decision {verdict!r}, not 'promote'"
        )
    if not isinstance(lifts, dict) or not isinstance(rules, dict):
        return EvalEvidence(path, UNREADABLE, f"{where} has no 'lifts' or 'rules' section")
    slices = [str(s) for s in rules.get("required_slices") or []] or [OVERALL_SLICE]
    for name in slices:
        lift = lifts.get(name)
        mean = lift.get("mean") if isinstance(lift, dict) else None
        if not isinstance(mean, int | float) or mean <= 0:
            note = f"{where} promotes but shows no NDCG@10 lift over the baseline in slice {name!r}"
            return EvalEvidence(path, "no-eval-evidence", f"{note} (mean lift {mean!r})")
    labels = [_policy_label(artifact.get(role)) for role in ("candidate", "baseline")]
    note = f"promoted by {path!r}: candidate {labels[0]} beat baseline {labels[1]}"
    return EvalEvidence(path, None, f"{note} on {', '.join(slices)}")


def _policy_label(policy: object) -> str:
    if not isinstance(policy, dict):
        return "?"
    return f"{policy.get('policy_id', '?')}@{policy.get('version', '?')}"
