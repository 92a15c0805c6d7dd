"""Credential detection over up to 16 MiB of raw bytes, fast enough to run on every artifact.

`ivoai.common.redact.find_secrets` runs each pattern over the whole text; on 16 MiB of log output
that takes seconds. This module finds the same pattern names (a test pins the equivalence on a
corpus) by first looking for each pattern's literal anchor with `bytes.find` and then running the
pattern only in a window around each hit. A pattern without a known anchor, or one whose anchor
occurs more than ARTIFACT_SCAN_MAX_ANCHOR_HITS times, is run over the whole payload instead, so a
new pattern added to `common.redact` is never silently skipped.

It adds a few raw-auth forms of its own (Slack, Google, npm, Stripe keys; passwords in URLs).
Binary payloads are scanned byte-for-byte (the patterns are ASCII).
"""

from __future__ import annotations

import re

from ivoai.common.limits import ARTIFACT_SCAN_MAX_ANCHOR_HITS
from ivoai.common.redact import _PATTERNS as _REDACT_PATTERNS

# Window around an anchor hit: the patterns' fixed parts plus bounded whitespace fit easily.
_BEFORE = 64
_AFTER = 512

# name -> (anchors, anchors_are_case_insensitive)
_ANCHORS: dict[str, tuple[tuple[bytes, ...], bool]] = {
    "pem_private_key": ((b"-----begin ",), True),
    "authorization_header": ((b"authorization",), True),
    "bearer": ((b"bearer",), True),
    "anthropic_key": ((b"sk-ant-",), False),
    "openai_key": ((b"sk-",), False),
    "github_token": ((b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_"), False),
    "aws_access_key": ((b"AKIA", b"ASIA"), False),
    "aws_secret": ((b"aws_secret_access_key",), True),
    "jwt": ((b"eyJ",), False),
    "slack_token": ((b"xox",), False),
    "google_api_key": ((b"AIza",), False),
    "npm_token": ((b"npm_",), False),
    "stripe_key": ((b"sk_live_", b"rk_live_"), False),
    "url_password": ((b"://",), False),
}

_EXTRA: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    ("slack_token", re.compile(rb"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(rb"\bAIza[0-9A-Za-z_\-]{35}")),
    ("npm_token", re.compile(rb"\bnpm_[A-Za-z0-9]{36}")),
    ("stripe_key", re.compile(rb"\b[rs]k_live_[A-Za-z0-9]{16,}")),
    (
        "url_password",
        re.compile(rb"\b[a-z][a-z0-9+.\-]{1,15}://[^\s/:@]{1,64}:[^\s/@]{3,128}@[A-Za-z0-9.\-]"),
    ),
)

_PATTERNS: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    tuple(
        (name, re.compile(p.pattern.encode("ascii"), p.flags & ~re.UNICODE)) for name, p in _REDACT_PATTERNS
    )
    + _EXTRA
)

# `labelled_secret` (keyword, separator, 16+ value characters): its keywords are common words in
# logs ("token", "code"), so its anchor is the separator-plus-value shape, found per keyword with a
# literal-prefixed regex over the lower-cased payload.
_LABEL_KEYWORDS = (b"code", b"credential", b"token", b"key", b"secret", b"password")
_LABEL_SITES = tuple(
    re.compile(re.escape(kw) + rb'"?\s{0,64}[:=]\s{0,64}"?[a-z0-9\-._~+/]{16}') for kw in _LABEL_KEYWORDS
)
_LABELLED = "labelled_secret"


def _window_hit(pattern: re.Pattern[bytes], data: bytes, hay: bytes, anchors: tuple[bytes, ...]) -> bool:
    for anchor in anchors:
        hits = 0
        i = hay.find(anchor)
        while i != -1:
            hits += 1
            if hits > ARTIFACT_SCAN_MAX_ANCHOR_HITS:
                return pattern.search(data) is not None
            if pattern.search(data, max(0, i - _BEFORE), i + _AFTER):
                return True
            i = hay.find(anchor, i + 1)
    return False


def scan_bytes(data: bytes) -> list[str]:
    """Names of the credential forms found in `data` (never the values), in pattern order."""
    lowered: bytes | None = None
    found: list[str] = []
    for name, pattern in _PATTERNS:
        if name == _LABELLED:
            if lowered is None:
                lowered = data.lower()
            if any(
                pattern.search(data, max(0, m.start() - _BEFORE), m.end() + _AFTER)
                for site in _LABEL_SITES
                for m in site.finditer(lowered)
            ):
                found.append(name)
            continue
        anchor = _ANCHORS.get(name)
        if anchor is None:
            if pattern.search(data):
                found.append(name)
            continue
        anchors, insensitive = anchor
        if insensitive and lowered is None:
            lowered = data.lower()
        hay = lowered if insensitive and lowered is not None else data
        if _window_hit(pattern, data, hay, anchors):
            found.append(name)
    return found
