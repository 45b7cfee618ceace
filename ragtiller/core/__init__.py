"""What every layer shares: the tier protocol and its records, a turn's decisions, the run
manifest, metadata filters, redaction, retry, bulkheads and breakers. Imports only ``errors``."""

from ragtiller.core.retry import RetryPolicy

__all__ = ("RetryPolicy",)
