"""The one step that still needs torch: export the bundled MiniLM to ONNX (and quantize it).

Mean pooling and L2 normalisation are part of the graph, as sentence-transformers computes
them; eager attention (not SDPA) lets onnxruntime's optimizer fuse it. The uint8 variant
quantizes the fused weights per channel, unsigned as the activations are: u8 x u8 products are
exact on every CPU, while signed weights saturate on x86 CPUs without VNNI, where the same text
got another vector and the same index another score (issue 43).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ragtiller.errors import ModelPrepareError
from ragtiller.models.embedders import quiet_transformers
from ragtiller.models.onnx_model import (
    OnnxMiniLMEmbedder,
    PreparedModel,
    Variant,
    runtime_environment,
)

EXPORT_INSTALL_HINT = (
    "exporting the local model to ONNX needs torch, transformers and onnx: "
    "pip install torch==2.13.0 then pip install 'ragtiller[export]'"
)
PROBE_TEXTS = (
    "How do I cancel an asyncio task?",
    "SQLite cursors fetch rows from a database table.",
    "experimental investigation of the aerodynamics of a wing in a slipstream .",
    "the boundary layer on a flat plate in hypersonic flow " * 40,  # past 256 wordpieces
    "résumé, naïve café — Ünïcode and 中文 characters",
    "A compiler translates source code into machine instructions.",
    "x",
    "What is the capital of Normandy, and when was it founded?",
)
MIN_PROBE_COSINE = 0.992
"""Least mean cosine of the probe texts' uint8 and float32 vectors: measured 0.9931 on every
CPU; signed int8 weights gave 0.9916 on an AVX2 CPU without VNNI, where they saturate."""


def export_onnx(model_dir: Path, destination: Path, variant: Variant, scratch: Path) -> None:
    """Write the ``variant`` ONNX model of the bundled files in ``model_dir``."""
    try:
        import onnx
        import torch
        from onnxruntime import quantization
        from onnxruntime.transformers import optimizer
        from transformers import AutoModel
    except ImportError as e:
        raise ModelPrepareError(f"{EXPORT_INSTALL_HINT} ({e})") from e

    raw = scratch / "raw.onnx"
    fused = destination if variant == "fp32" else scratch / "fused.onnx"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes about constant shapes, not errors
            with quiet_transformers():
                bert = AutoModel.from_pretrained(
                    str(model_dir), local_files_only=True, attn_implementation="eager"
                ).eval()
            sample = torch.ones((2, 8), dtype=torch.int64)
            with torch.no_grad():
                torch.onnx.export(
                    _pooled(torch, bert),
                    (sample, sample),
                    str(raw),
                    input_names=["input_ids", "attention_mask"],
                    output_names=["sentence_embedding"],
                    dynamic_axes={
                        "input_ids": {0: "batch", 1: "tokens"},
                        "attention_mask": {0: "batch", 1: "tokens"},
                        "sentence_embedding": {0: "batch"},
                    },
                    opset_version=17,
                    dynamo=False,
                )
            model = optimizer.optimize_model(
                str(raw), model_type="bert", num_heads=12, hidden_size=384
            )
            model.save_model_to_file(str(fused))
            if variant == "uint8":
                logging.disable(logging.WARNING)  # its root-logger advice about pre-processing
                try:
                    quantization.quantize_dynamic(
                        str(fused),
                        str(destination),
                        weight_type=quantization.QuantType.QUInt8,
                        per_channel=True,  # per-tensor scales cost 0.07 in cosine to fp32
                        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
                    )
                finally:
                    logging.disable(logging.NOTSET)
    except Exception as e:
        raise ModelPrepareError(f"exporting the local model to ONNX failed: {e}") from e
    if variant == "uint8":
        tokenizer = model_dir / "tokenizer.json"
        check_quantized(
            PreparedModel(destination, tokenizer, variant, ""),
            PreparedModel(fused, tokenizer, "fp32", ""),
        )


def check_quantized(model: PreparedModel, reference: PreparedModel) -> None:
    """Refuse a quantized export that strays from the float graph on this machine."""
    cosine = probe_cosine(model, reference)
    if cosine < MIN_PROBE_COSINE:
        raise ModelPrepareError(
            f"the {model.variant} export strays from the float model on this machine: mean "
            f"cosine {cosine:.4f} < {MIN_PROBE_COSINE} on the probe texts "
            f"({runtime_environment()}); use the fp32 variant (ragtiller model prepare "
            "--variant fp32, local_embedder(variant='fp32')) and report it"
        )


def probe_cosine(model: PreparedModel, reference: PreparedModel) -> float:
    """The mean cosine of the two models' vectors of :data:`PROBE_TEXTS`, each embedded alone."""
    got, want = (
        np.vstack([OnnxMiniLMEmbedder(m, threads=1).embed_matrix([t]) for t in PROBE_TEXTS])
        for m in (model, reference)
    )
    return float((got * want).sum(axis=1).mean())


def _pooled(torch: Any, bert: Any) -> Any:
    class Pooled(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            tokens = self.bert(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=torch.zeros_like(input_ids),
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    return Pooled()
