"""The exception hierarchy: one root, narrow subclasses that also subclass the builtin they resemble."""

from __future__ import annotations


class RagtillerError(Exception):
    """Root of every error ragtiller raises on purpose."""


class PolicyError(RagtillerError, ValueError):
    """A retrieval policy file or object is invalid; the message names the file and field path."""


class IndexStoreError(RagtillerError, LookupError):
    """An index directory is missing, partial, corrupt or built with another embedder."""


class IngestError(RagtillerError, ValueError):
    """Documents could not be ingested (for example, the corpus is empty)."""


class EmbeddingError(RagtillerError, RuntimeError):
    """The embedder failed after every retry."""


class StoreUnavailableError(RagtillerError, ConnectionError):
    """A shared store (Redis) could not be reached."""


class ConfigurationError(RagtillerError, ValueError):
    """Components passed to ``build_graph`` (or read from the environment) do not fit together."""


class InputError(RagtillerError, ValueError):
    """A turn's input is not one the graph accepts; the message names the key and the shapes."""


class TierUnavailable(RagtillerError, RuntimeError):
    """A tier cannot run this turn for a known reason (e.g. ``no-credentials``); reported as skipped.

    Attributes:
        reason: The short reason shown in the stage event (``no-credentials``, ...).
    """

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason


class ModelPrepareError(RagtillerError, RuntimeError):
    """The local model could not be exported to ONNX (an exporter is missing, or it failed)."""
