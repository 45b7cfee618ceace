"""Evaluation harness: datasets, metrics, runs through the serving graph, promotion, tuning."""

from ragtiller.errors import EvalError
from ragtiller.eval.datasets import (
    EvalDataset,
    dataset_kind,
    load_beir,
    load_dataset,
    load_qa,
    load_slice_labels,
)
from ragtiller.eval.honesty import Degradation, degradation, without_deadlines
from ragtiller.eval.metrics import (
    QueryScores,
    answer_hit_at_k,
    answer_rr_at_k,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
    score_query,
)
from ragtiller.eval.promotion import (
    Comparison,
    Lift,
    PromotionDecision,
    RuleResult,
    bootstrap_ci,
    compare_runs,
    decide,
    decision_artifact,
    paired_differences,
    write_decision,
)
from ragtiller.eval.runner import EvalRun, QueryResult, arun_eval, run_eval
from ragtiller.eval.summary import SliceMetrics, summarize

__all__ = (
    "Comparison",
    "Degradation",
    "EvalDataset",
    "EvalError",
    "EvalRun",
    "Lift",
    "PromotionDecision",
    "QueryResult",
    "QueryScores",
    "RuleResult",
    "SliceMetrics",
    "answer_hit_at_k",
    "answer_rr_at_k",
    "arun_eval",
    "bootstrap_ci",
    "compare_runs",
    "dataset_kind",
    "decide",
    "decision_artifact",
    "degradation",
    "load_beir",
    "load_dataset",
    "load_qa",
    "load_slice_labels",
    "mrr_at_k",
    "ndcg_at_k",
    "paired_differences",
    "recall_at_k",
    "run_eval",
    "score_query",
    "summarize",
    "without_deadlines",
    "write_decision",
)
