"""Evaluation harness: BEIR datasets, metrics, runs through the serving graph, promotion."""

from ragtiller.eval._errors import EvalError
from ragtiller.eval.compare import Comparison, Lift, bootstrap_ci, compare_runs, paired_differences
from ragtiller.eval.datasets import EvalDataset, load_beir, load_slice_labels
from ragtiller.eval.metrics import QueryScores, mrr_at_k, ndcg_at_k, recall_at_k, score_query
from ragtiller.eval.promotion import (
    PromotionDecision,
    RuleResult,
    decide,
    decision_artifact,
    write_decision,
)
from ragtiller.eval.report import SliceMetrics, summarize
from ragtiller.eval.runner import EvalRun, QueryResult, arun_eval, run_eval

__all__ = (
    "Comparison",
    "EvalDataset",
    "EvalError",
    "EvalRun",
    "Lift",
    "PromotionDecision",
    "QueryResult",
    "QueryScores",
    "RuleResult",
    "SliceMetrics",
    "arun_eval",
    "bootstrap_ci",
    "compare_runs",
    "decide",
    "decision_artifact",
    "load_beir",
    "load_slice_labels",
    "mrr_at_k",
    "ndcg_at_k",
    "paired_differences",
    "recall_at_k",
    "run_eval",
    "score_query",
    "summarize",
    "write_decision",
)
