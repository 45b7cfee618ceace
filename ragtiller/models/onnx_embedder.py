"""The bundled MiniLM served by onnxruntime and ``tokenizers``: no torch, no transformers.

Importing torch and sentence-transformers costs seconds per process; this path starts in a
fraction of that. The exported graph already pools and normalises (see ``onnx_export``), so
this module only tokenizes the way sentence-transformers does (lower-casing WordPiece,
truncated at 256 wordpieces, padded per batch) and runs the session. Texts are grouped by
length before batching, so a batch pads to similar lengths, and returned in input order.
The batches of one call run concurrently, one single-threaded session run per CPU core: at
ingest's batch sizes that uses the cores better than intra-op threads do (benchmarks/README.md,
"Local ingest on every core"), and each batch's vectors are the same as when run alone.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from ragtiller.models._threaded import ThreadedEmbeddings
from ragtiller.models.onnx_model import MAX_SEQ_LENGTH, PreparedModel

MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
RUNTIME_INSTALL_HINT = (
    "the ONNX local embedder needs onnxruntime and tokenizers: pip install 'ragtiller[local]'"
)


class OnnxMiniLMEmbedder(ThreadedEmbeddings):
    """all-MiniLM-L6-v2 (384 dimensions) from a prepared ONNX export, fully offline.

    The session is created on first use. Vectors match sentence-transformers' to a cosine
    of at least 0.99 (``fp32``: 0.99999) and are L2-normalised.

    Args:
        model: The prepared export (see :func:`ragtiller.models.onnx_model.prepare_model`).
        batch_size: Texts per session run.
        threads: onnxruntime intra-op threads; ``None`` lets onnxruntime decide.
        workers: Batches of one call run at once (session runs in flight); ``None``: the CPU
            cores this process may use.

    Example:
        >>> from ragtiller.models.onnx_model import prepare_model
        >>> emb = OnnxMiniLMEmbedder(prepare_model("uint8"))  # doctest: +SKIP
        >>> len(emb.embed_query("How do I cancel a task?"))  # doctest: +SKIP
        384
    """

    model_name = MINILM_NAME
    dimension = 384
    input_window = MAX_SEQ_LENGTH - 2
    """Content wordpieces the model reads of one text ([CLS] and [SEP] take the other two)."""

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
        self.workers = workers or _cores()
        self.variant = f"onnx-{model.variant}"
        self._session: Any = None
        self._tokenizer: Any = None
        self._counter: Any = None
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts, shortest first in batches of ``batch_size``, returned in input order.

        Raises:
            ImportError: onnxruntime or tokenizers is not installed (the message says how).
        """
        return self.embed_matrix(texts).tolist()  # type: ignore[no-any-return]

    def embed_matrix(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """The embeddings as one float32 matrix, a row per text in input order."""
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
        """Each text's wordpieces, special tokens excluded and nothing cut (chunking reads it
        to keep a chunk within :attr:`input_window`)."""
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


def _cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1
