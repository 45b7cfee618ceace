"""The ``ragtiller`` command: one entry point (:func:`main`), also run by ``python -m ragtiller``."""

from ragtiller.cli.app import main

__all__ = ("main",)
