"""``ragtiller policy show NAME`` and ``ragtiller policy migrate FILE``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from ragtiller.errors import PolicyError
from ragtiller.policies.fields import fields_table
from ragtiller.policies.loader import load_policy, load_yaml, read_policy_file, upgrade_v1


def add_policy_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    policy = subparsers.add_parser("policy", help="Show or migrate retrieval policies.")
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
    migrate = actions.add_parser(
        "migrate", help="Rewrite a schema-1 policy file as schema 2 and list the changes."
    )
    migrate.add_argument("file", type=Path, help="The policy YAML file.")
    migrate.add_argument("-o", "--out", type=Path, help="Write here instead of over FILE.")
    migrate.set_defaults(func=_migrate)


def _show(args: argparse.Namespace) -> int:
    policy = load_policy(args.name)
    if args.fields:
        print(fields_table(policy), end="")
    else:
        print(yaml.safe_dump(policy.model_dump(mode="json"), sort_keys=False), end="")
    return 0


def migrate_text(text: str, source: str) -> tuple[str, list[str]]:
    """A policy file's text as schema 2 (comments kept above the data), and the changes made."""
    data: Any = load_yaml(text, source=source)  # bounded, as for load_policy
    if not isinstance(data, dict) or not data:
        raise PolicyError(f"{source}: expected a mapping at the top level")
    upgraded, changes = upgrade_v1(data)
    if not changes:
        return text, []
    comments = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    body = yaml.safe_dump(upgraded, sort_keys=False, default_flow_style=None, width=100)
    return comments + body, changes


def _migrate(args: argparse.Namespace) -> int:
    text, changes = migrate_text(read_policy_file(args.file), str(args.file))
    if not changes:
        print(f"{args.file}: already schema 2, nothing to do")
        return 0
    out = args.out or args.file
    out.write_text(text, encoding="utf-8")
    load_policy(out)  # the written file must load as schema 2
    print(f"wrote {out}: " + "; ".join(changes), file=sys.stdout)
    return 0
