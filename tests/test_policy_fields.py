"""Every policy field is read by code: a knob nothing reads fails here, not in a user's hands."""

from __future__ import annotations

import re
import tokenize
import warnings
from pathlib import Path

import pytest
from pydantic import BaseModel

from ragtiller import load_policy
from ragtiller.policies.loader import parse_policy, upgrade_v1
from ragtiller.policies.schema import RetrievalPolicy

PACKAGE = Path(__file__).resolve().parents[1] / "ragtiller"
CHECKED_BY_TYPE = {"schema_version"}
"""Fields whose only reader is their type: a ``Literal`` the loader validates."""


def fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str]]:
    found = []
    for name, info in model.model_fields.items():
        found.append((f"{prefix}{name}", name))
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += fields(annotation, f"{prefix}{name}.")
    return found


def code_only(path: Path) -> str:
    """The file's code without strings and comments, so a docstring naming a field is no read."""
    with path.open("rb") as handle:
        tokens = tokenize.tokenize(handle.readline)
        kept = [t.string for t in tokens if t.type not in (tokenize.STRING, tokenize.COMMENT)]
    return " ".join(kept).replace(" . ", ".")


SOURCE = "\n".join(code_only(p) for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize(("path", "name"), fields(RetrievalPolicy))
def test_field_is_read_by_code(path: str, name: str) -> None:
    if name in CHECKED_BY_TYPE:
        return
    assert re.search(rf"\.{name}\b", SOURCE), f"policy field {path} is read nowhere in ragtiller/"


def test_v1_files_upgrade_with_a_warning_naming_the_changes() -> None:
    v1 = {
        "schema_version": 1,
        "policy_id": "p",
        "version": "1",
        "default_route": {"namespace": "default", "top_k": 5},
        "routes": {
            name: {"fusion": False, "hybrid": True}
            for name in ("exact_lexical_lookup", "factual_lookup", "synthesis")
        },
        "router": {"baseline": "deterministic"},
        "step_back": {"timeout_s": 3},
        "eval_slices": ["x"],
    }
    with pytest.warns(
        DeprecationWarning, match="routes.synthesis.fusion -> routes.synthesis.parent_child"
    ):
        policy = parse_policy(v1, source="old.yaml")
    assert policy.schema_version == 2
    assert policy.routes["synthesis"].parent_child is False
    assert policy.deadlines.step_back_s == 3
    _, changes = upgrade_v1(v1)
    assert "eval_slices removed (nothing read it)" in changes
    assert "router.baseline removed (deterministic is the only baseline)" in changes


def test_shipped_default_is_schema_2_and_loads_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_policy().schema_version == 2


def test_policy_migrate_writes_a_schema_2_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragtiller.cli.app import main

    old = tmp_path / "old.yaml"
    old.write_text(
        "# my policy\nschema_version: 1\npolicy_id: p\nversion: '1'\n"
        "default_route: {namespace: default, top_k: 5}\nrouter: {baseline: deterministic}\n"
        "routes:\n"
        "  factual_lookup: {fusion: false}\n  exact_lexical_lookup: {}\n  synthesis: {fusion: true}\n",
        encoding="utf-8",
    )
    assert main(["policy", "migrate", str(old)]) == 0
    assert (
        "routes.factual_lookup.fusion -> routes.factual_lookup.parent_child"
        in capsys.readouterr().out
    )
    text = old.read_text("utf-8")
    assert text.startswith("# my policy\n") and "schema_version: 2" in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        migrated = load_policy(old)
    assert migrated.routes["factual_lookup"].parent_child is False


def test_policy_show_prints_the_effective_policy(capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from ragtiller.cli.app import main

    assert main(["policy", "show", "default"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert parse_policy(shown) == load_policy()
    assert shown["deadlines"]["turn_s"] == 15
