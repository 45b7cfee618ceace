"""The one step that still needs torch: export the bundled MiniLM to ONNX (and quantize it).

The graph takes ``input_ids`` and ``attention_mask`` and returns the sentence embedding:
mean pooling over real tokens and L2 normalisation are part of the graph, exactly as
sentence-transformers' Pooling and Normalize modules compute them. Eager attention is
exported (not SDPA) so onnxruntime's transformer optimizer can fuse it into its Attention
kernels; the int8 variant then quantizes the fused graph's weights dynamically, per channel.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

from ragtiller.errors import ModelPrepareError
from ragtiller.models.onnx_model import Variant

EXPORT_INSTALL_HINT = (
    "exporting the local model to ONNX needs torch, transformers and onnx: "
    "pip install torch==2.13.0 then pip install 'ragtiller[export]'"
)
_OPSET = 17
_HEADS = 12
_HIDDEN = 384


def export_onnx(model_dir: Path, destination: Path, variant: Variant, scratch: Path) -> None:
    """Write the ``variant`` ONNX model of the sentence-transformers files in ``model_dir``.

    Args:
        model_dir: The bundled model directory (safetensors, config, tokenizer).
        destination: The ONNX file to write.
        variant: ``fp32`` or ``int8``.
        scratch: A directory for intermediate files.

    Raises:
        ModelPrepareError: An exporter dependency is missing, or the export failed.
    """
    torch, auto_model, optimizer, quantization = _import_exporter()
    from transformers.utils import logging as hf_logging

    raw = scratch / "raw.onnx"
    fused = destination if variant == "fp32" else scratch / "fused.onnx"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes about constant shapes, not errors
            bars = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
            try:
                bert = auto_model.from_pretrained(
                    str(model_dir), local_files_only=True, attn_implementation="eager"
                ).eval()
            finally:
                if bars:
                    hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
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
                    opset_version=_OPSET,
                    dynamo=False,
                )
            model = optimizer.optimize_model(
                str(raw), model_type="bert", num_heads=_HEADS, hidden_size=_HIDDEN
            )
            model.save_model_to_file(str(fused))
            if variant == "int8":
                import onnx

                logging.disable(logging.WARNING)  # its root-logger advice about pre-processing
                try:
                    quantization.quantize_dynamic(
                        str(fused),
                        str(destination),
                        weight_type=quantization.QuantType.QInt8,
                        per_channel=True,  # per-tensor scales cost 0.07 in cosine to fp32
                        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
                    )
                finally:
                    logging.disable(logging.NOTSET)
    except Exception as e:
        raise ModelPrepareError(f"exporting the local model to ONNX failed: {e}") from e


def _import_exporter() -> tuple[Any, Any, Any, Any]:
    try:
        import onnx  # noqa: F401  (the optimizer and the quantizer need it)
        import torch
        from onnxruntime import quantization
        from onnxruntime.transformers import optimizer
        from transformers import AutoModel
    except ImportError as e:
        raise ModelPrepareError(f"{EXPORT_INSTALL_HINT} ({e})") from e
    return torch, AutoModel, optimizer, quantization


def _pooled(torch: Any, bert: Any) -> Any:
    """``bert`` followed by sentence-transformers' mean pooling and L2 normalisation."""

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
