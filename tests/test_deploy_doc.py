"""docs/deploy.md shows the diagram the code draws, and the server graph honours the backends."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ragtiller.integrations import studio
from ragtiller.integrations.deployment import deploy_policy, deployment_mermaid
from ragtiller.policies import load_policy

DOC = Path(__file__).resolve().parent.parent / "docs" / "deploy.md"


def test_the_doc_embeds_the_generated_diagram() -> None:
    blocks = re.findall(r"```mermaid\n(.*?)```", DOC.read_text("utf-8"), flags=re.S)
    assert blocks == [deployment_mermaid(deploy_policy())]


def test_the_diagram_follows_the_policy() -> None:
    embedded = deployment_mermaid(load_policy())
    assert "Pinecone" not in embedded and 'app -->|"dense tier"| disk' in embedded
    remote = deployment_mermaid(deploy_policy())
    assert (
        "PINECONE_SPARSE_HOST" in remote
        and "lexical fallback: no credentials or an outage" in remote
    )


def test_the_server_graph_serves_the_policy_backends(tmp_path: Path) -> None:
    policy_file = tmp_path / "deploy.yaml"
    policy_file.write_text(yaml.safe_dump(deploy_policy().model_dump(mode="json")), "utf-8")
    graph = studio.build_studio_graph({studio.POLICY_ENV: str(policy_file)})
    out = graph.invoke({"query": "json.dumps"})
    assert out["documents"]  # no Pinecone key: the embedded tiers answer, labelled
    # each tier with a backend choice says in its stage which backend served it, and why
    served = {
        s["detail"]["tier"]: (s["detail"].get("served_by"), s["detail"].get("fallback_reason"))
        for s in out["stages"]
        if s["step"] == "tier_search" and s["status"] == "done"
    }
    assert served == {
        "dense": ("embedded", "no-credentials"),
        "lexical": ("embedded", "no-credentials"),
    }
    assert "tier_search (dense) served by fallback embedded: no-credentials" in (
        out["manifest"].degraded
    )
