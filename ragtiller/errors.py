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


class EmbeddingServiceError(EmbeddingError):
    """An embedding service answered one call with an error status (None: no answer)."""

    def __init__(
        self, message: str, *, status_code: int | None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after_s = retry_after_s


class EmbeddingTimeoutError(EmbeddingServiceError, TimeoutError):
    """An embedding call got no answer within its deadline."""


class StoreUnavailableError(RagtillerError, ConnectionError):
    """A shared store (Redis) could not be reached."""


class StoreOverloaded(StoreUnavailableError):
    """No pooled connection to the store came free in time: this process has more calls in
    flight than connections. The store did nothing wrong, so its breaker does not count it."""


class ConfigurationError(RagtillerError, ValueError):
    """Components passed to ``build_graph`` (or read from the environment) do not fit together."""


class InputError(RagtillerError, ValueError):
    """A turn's input is not one the graph accepts; the message names the key and the shapes."""


class TierUnavailable(RagtillerError, RuntimeError):
    """A tier cannot run this turn for a known ``reason`` (``no-credentials``): it is skipped."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason


class ModelPrepareError(RagtillerError, RuntimeError):
    """The local model could not be exported to ONNX (an exporter is missing, or it failed)."""


class UnknownResourceError(RagtillerError, KeyError):
    """A quota resource was named that the ledger has no limit for."""

    def __str__(self) -> str:  # the message itself: KeyError would show its repr
        return str(self.args[0]) if self.args else ""


class DeadlineExceeded(RagtillerError, TimeoutError):
    """A caller's own deadline passed; a provider's own ``TimeoutError`` is never this one."""


class Overloaded(RagtillerError, RuntimeError):
    """No worker of a provider's pool came free within the caller's deadline: the call never
    started, and the provider is not to blame (reason ``overloaded``)."""


class ProviderHung(RagtillerError, RuntimeError):
    """A provider's calls keep outliving their deadlines (or hold every thread it may have): it
    is refused at once until a probe answers in time (reason ``hung``)."""


class MissingCredentialsError(ConfigurationError):
    """No Cohere API key was given and ``COHERE_API_KEY`` is not set."""


class EvalError(RagtillerError, ValueError):
    """An eval dataset, run or comparison is invalid; the message names the file or query."""


class PineconeTierError(RagtillerError, ConnectionError):
    """Pinecone failed a search in ``namespace``: HTTP ``status_code``, no connection, a timeout."""

    def __init__(self, message: str, *, status_code: int | None, namespace: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.namespace = namespace


class PineconeTimeoutError(PineconeTierError, TimeoutError):
    """No answer within the tier's ``timeout_s`` (SDK-internal retries included)."""


def describe_error(exc: BaseException, *, secret: str | None = None) -> str:
    """``Type: first line of the message``, ``secret`` masked, at most 300 characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if secret:
        text = text.replace(secret, "***")
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line[:300]
