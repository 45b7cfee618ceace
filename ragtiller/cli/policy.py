"""``ragtiller policy show NAME``."""

from __future__ import annotations

import argparse

import yaml

from ragtiller.policies.fields import fields_table
from ragtiller.policies.loader import load_policy


def add_policy_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``policy show`` to the ``ragtiller`` command."""
    policy = subparsers.add_parser("policy", help="Show retrieval policies.")
    actions = policy.add_subparsers(dest="policy_command", required=True)
    show = actions.add_parser("show", help="Print the effective policy, every default filled in.")
    show.add_argument(
        "name", nargs="?", help="A shipped policy name or YAML path (default: default)."
    )
    show.add_argument(
        "--fields",
        action="store_true",
        help="Print every field instead: its value, when it applies and what it does.",
    )
    show.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    policy = load_policy(args.name)
    if args.fields:
        print(fields_table(policy), end="")
    else:
        print(yaml.safe_dump(policy.model_dump(mode="json"), sort_keys=False), end="")
    return 0
