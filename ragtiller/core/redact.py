"""Strip credentials from provider error text before it is stored (manifests, events, logs):
providers echo what they were sent. It errs towards removing too much (a request id goes too)."""

from __future__ import annotations

import itertools
import re

REDACTED = "[REDACTED]"

# A secret's value: up to whitespace, a delimiter or a closing bracket; never a redaction.
_VALUE = rf"(?!{re.escape(REDACTED)})[^\s&'\",;)}}\]]+"

_SECRET_NAME = (  # api_key, X-Goog-Api-Key, key, ...
    r"[\w.-]*?(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|id[_-]?token"
    r"|refresh[_-]?token|session[_-]?token|client[_-]?secret|secret|password|passwd"
    r"|signature|sig|key|token)"
)

_HEADER = r"(?:proxy-)?authorization|[\w-]*api-key|x-auth-token"

# A name or key never begins inside a run of word characters and hyphens: a match starts once
# per run, not at every position in it, which keeps redaction linear in the text.
_START = r"(?<![\w-])"
_SCHEME = r"(?:bearer|basic|token|digest)\s+"  # kept, so the reader sees what kind was sent

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # "Authorization: Bearer <t>", "x-api-key: <t>": the scheme word is kept, the value goes.
    (re.compile(rf"(?i){_START}({_HEADER})(\s*:\s*)({_SCHEME})?+{_VALUE}"), rf"\1\2\3{REDACTED}"),
    # {'Authorization': 'Bearer <t>'}, "api_key": "<t>": a quoted field of a dict or JSON body.
    (
        re.compile(
            rf"(?i)(['\"])((?:{_HEADER})|{_SECRET_NAME})\1(\s*:\s*)(['\"])({_SCHEME})?+[^'\"]*\4"
        ),
        rf"\1\2\1\3\4\5{REDACTED}\4",
    ),
    # ?api_key=<t>&key=<t>, password=<t>: a query or form parameter, or a keyword argument.
    (re.compile(rf"(?i)(?<![\w.-])({_SECRET_NAME})=['\"]?{_VALUE}"), rf"\1={REDACTED}"),
    # Bearer <t> anywhere else.
    (re.compile(rf"(?i)\b(bearer)\s+{_VALUE}"), rf"\1 {REDACTED}"),
    # scheme://user:password@host (a Redis or proxy URL).
    (
        re.compile(r"(?i)((?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://)[^/\s:@]*:[^/\s@]+@"),
        rf"\1{REDACTED}@",
    ),
    # Keys known by their prefix, even masked in part by the provider ("sk-abc1****xyz9").
    (
        re.compile(
            rf"{_START}(?:sk-[A-Za-z0-9_*-]{{8,}}|pcsk_[A-Za-z0-9_*]{{8,}}|AIza[0-9A-Za-z_-]{{30,}}"
            r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|hf_[A-Za-z0-9]{20,}"
            r"|xox[abprs]-[A-Za-z0-9-]{10,}|A[KS]IA[0-9A-Z]{16}"
            r"|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*)"
        ),
        REDACTED,
    ),
)

_LONG_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{32,}")  # base64, base62, hex or a UUID


def _looks_random(token: str) -> bool:
    """Whether ``token`` reads as a key: its case and digits switch often (``my-index-2024``'s not)."""
    classes = [
        "d" if ch.isdigit() else "u" if ch.isupper() else "l" for ch in token if ch.isalnum()
    ]
    if "d" not in classes or len(classes) == classes.count("d"):
        return False
    switches = sum(a != b for a, b in itertools.pairwise(classes))
    return switches * 5 >= len(classes)


def redact(text: str) -> str:
    """``text`` without credential headers and fields, bearer tokens, secret parameters, URL
    passwords, known key prefixes and random-looking runs of 32+ characters; idempotent."""
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return _LONG_TOKEN.sub(lambda m: REDACTED if _looks_random(m[0]) else m[0], text)
