"""The deployment as a Mermaid flowchart drawn from a policy and the variables the code reads, so
docs/deploy.md's copy (a test keeps them equal) cannot drift: ``python -m`` this module prints it."""

from __future__ import annotations

import sys

from ragtiller.integrations.studio import INDEX_ENV, POLICY_ENV
from ragtiller.pinecone import env as pinecone_env
from ragtiller.policies import RetrievalPolicy, load_policy
from ragtiller.policies.schema import BackendConfig
from ragtiller.rerankers.cohere_rerank import API_KEY_ENV as COHERE_API_KEY_ENV

REDIS_URL_ENV = "REDIS_URL"  # read by ragtiller.stores.stores_from_env
GRAPH_FACTORY = "./ragtiller/integrations/studio_graphs.py:make_graph"  # as langgraph.json


def deploy_policy() -> RetrievalPolicy:
    """The default policy with dense and lexical on Pinecone, falling back to the embedded index."""
    policy = load_policy()
    pinecone = {"provider": "pinecone", "fallback": "embedded", "fallback_on_outage": True}
    return policy.model_copy(
        update={
            "dense_backend": policy.dense_backend.model_copy(update=pinecone),
            "lexical_backend": policy.lexical_backend.model_copy(update=pinecone),
        }
    )


def deployment_mermaid(policy: RetrievalPolicy) -> str:
    """A Mermaid flowchart of the services a replica serving ``policy`` talks to."""
    held = ["compiled graph", "embedder", "parent-child tier"]
    if policy.lexical_backend.provider == "pinecone":
        held.append("BM25 statistics (vocabulary)")
    lines = [
        "flowchart LR",
        "    client([client]) -->|HTTP| lb[load balancer]",
        f'    subgraph replica["each LangGraph Server replica: langgraph.json, {GRAPH_FACTORY}"]',
        f'        app["{"<br/>".join(held)}"]',
        f'        disk[("embedded index, memory-mapped<br/>{INDEX_ENV}")]',
        "    end",
        "    lb --> app",
        '    app -->|"parent sections, corpus map"| disk',
        f'    redis[("Redis<br/>{REDIS_URL_ENV}")]',
        '    app -->|"quota ledger, step-back and rerank caches"| redis',
    ]
    lines += _backend(
        "dense",
        policy.dense_backend,
        policy.deadlines.pinecone_s,
        "pinecone_dense",
        "Pinecone dense index<br/>cosine",
        f"{pinecone_env.API_KEY_ENV}, {pinecone_env.HOST_ENV} | {pinecone_env.INDEX_ENV}",
    )
    lines += _backend(
        "lexical",
        policy.lexical_backend,
        policy.deadlines.pinecone_s,
        "pinecone_sparse",
        "Pinecone sparse index<br/>BM25 vectors + statistics",
        f"{pinecone_env.API_KEY_ENV}, {pinecone_env.SPARSE_HOST_ENV} | "
        f"{pinecone_env.SPARSE_INDEX_ENV}",
    )
    reranker = policy.reranker
    if "cohere" in (reranker.provider, reranker.ceiling):
        lines += [
            f'    cohere(["Cohere Rerank<br/>{COHERE_API_KEY_ENV}"])',
            '    app -->|"rerank (ceiling, quota-gated)"| cohere',
        ]
    lines.append(f'    policy[/"policy {policy.policy_id}<br/>{POLICY_ENV}"/] -.-> app')
    return "\n".join(lines) + "\n"


def _backend(
    tier: str, config: BackendConfig, deadline_s: float, node: str, label: str, variables: str
) -> list[str]:
    if config.provider == "embedded":
        return [f'    app -->|"{tier} tier"| disk']
    lines = [
        f'    {node}[("{label}<br/>{variables}")]',
        f'    app -->|"{tier} tier, {deadline_s:g} s deadline"| {node}',
    ]
    if config.fallback == "embedded":
        when = "no credentials or an outage" if config.fallback_on_outage else "no credentials"
        lines.append(f'    app -.->|"{tier} fallback: {when}"| disk')
    return lines


if __name__ == "__main__":
    chosen = load_policy(sys.argv[1]) if len(sys.argv) > 1 else deploy_policy()
    sys.stdout.write(deployment_mermaid(chosen))
