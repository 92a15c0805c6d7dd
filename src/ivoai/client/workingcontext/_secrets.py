"""Credential detection over up to 16 MiB of raw bytes, fast enough to run on every artifact.

The authority is `ivoai.common.redact.find_secrets`: a payload is refused when it reports any
credential form (plus a few raw-auth forms added here: Slack, Google, npm and Stripe keys).

Running `find_secrets` over 16 MiB of log output takes seconds, so large payloads are scanned in
two steps. First, literal-prefixed regular expressions over the lower-cased bytes find *candidate
sites*: the anchors every known credential form starts with (`-----begin`, `bearer`, `sk-`, `ghp_`,
`akia`, `eyj`, header names), `keyword[:=]` followed by 16 value characters, and
`scheme://user:password@`. Then `find_secrets` runs on a small window around each site.
Payloads up to SCAN_EXACT_MAX_BYTES are checked with `find_secrets` over the whole text, and a
site count beyond ARTIFACT_SCAN_MAX_ANCHOR_HITS also falls back to the whole text, so the fast
path only ever changes speed, never the verdict, for the forms it knows.

Bytes are decoded as Latin-1 (one character per byte), so binary payloads are scanned too.
"""

from __future__ import annotations

import re

from ivoai.common.limits import ARTIFACT_SCAN_MAX_ANCHOR_HITS, KIB
from ivoai.common.redact import find_secrets

SCAN_EXACT_MAX_BYTES = 64 * KIB  # below this, find_secrets runs over the whole payload
_BEFORE = 64
_AFTER = 512

# Anchors searched in the lower-cased payload: (literal, rest, must start at a word boundary).
# Each compiles to a literal-prefixed regex (`re` scans for a literal prefix far faster than
# `bytes.find` on short needles); the boundary is a lookbehind placed *after* the literal so the
# prefix scan is kept and look-alikes such as `task-` never reach Python.
_ANCHOR_SPECS: tuple[tuple[bytes, bytes, bool], ...] = (
    (b"-----begin", b"", False),
    (b"authorization", b"", True),
    (b"bearer", b"", True),
    (b"api-key", b"", False),
    (b"cookie", b"", True),
    (b"chatgpt-account-id", b"", True),
    (b"sk-", b"", True),
    (b"k_live_", b"", False),
    (b"gh", rb"(?:[pousr]|ithub_pat)_", True),
    (b"ivc_", b"", True),
    (b"akia", b"", True),
    (b"asia", b"", True),
    (b"aws_secret_access_key", b"", False),
    (b"eyj", b"", True),
    (b"xox", b"", True),
    (b"aiza", b"", True),
    (b"npm_", b"", True),
)
_ANCHORS: tuple[re.Pattern[bytes], ...] = tuple(
    re.compile(re.escape(lit) + (rb"(?<![a-z0-9_]" + re.escape(lit) + rb")" if boundary else b"") + rest)
    for lit, rest, boundary in _ANCHOR_SPECS
)
# More sites, also literal-prefixed: `keyword [:=] value` and `scheme://user:password@` (their
# windows start _BEFORE bytes earlier anyway, so the keyword's own prefix such as `client_` is seen).
_SITE_RES = tuple(
    re.compile(re.escape(kw) + rb'"?\s{0,64}[:=]\s{0,64}"?[a-z0-9\-._~+/]{16}')
    for kw in (b"code", b"credential", b"token", b"key", b"secret", b"password", b"passwd")
) + (re.compile(rb"://[^/\s:@]{1,256}:[^@\s/]{1,256}@"),)

_EXTRA: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("slack_token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}")),
    ("stripe_key", re.compile(r"\b[rs]k_live_[A-Za-z0-9]{16,}")),
)


def _check_text(text: str) -> list[str]:
    names = find_secrets(text)
    names.extend(name for name, pattern in _EXTRA if name not in names and pattern.search(text))
    return names


def _sites(lowered: bytes) -> list[int] | None:
    """Candidate offsets, sorted; None when there are too many (scan everything instead)."""
    sites: list[int] = []
    limit = ARTIFACT_SCAN_MAX_ANCHOR_HITS
    for site in _ANCHORS + _SITE_RES:
        for m in site.finditer(lowered):
            sites.append(m.start())
            if len(sites) > limit:
                return None
    sites.sort()
    return sites


def scan_bytes(data: bytes) -> list[str]:
    """Names of the credential forms found in `data` (never the values)."""
    if len(data) <= SCAN_EXACT_MAX_BYTES:
        return _check_text(data.decode("latin-1"))
    sites = _sites(data.lower())
    if sites is None:
        return _check_text(data.decode("latin-1"))
    found: list[str] = []
    covered = -1
    for i in sites:
        start, end = max(0, i - _BEFORE), i + _AFTER
        if end <= covered:
            continue
        # Widen the window to whitespace on both sides so no token is cut in half at an edge.
        lo = max(0, start - _BEFORE)
        ws = max(data.rfind(b" ", lo, start), data.rfind(b"\n", lo, start))
        right = (data.find(b" ", end, end + _BEFORE), data.find(b"\n", end, end + _BEFORE))
        nxt = [p for p in right if p != -1]
        window = data[ws + 1 if ws >= 0 else lo : min(nxt) if nxt else end + _BEFORE]
        for name in _check_text(window.decode("latin-1")):
            if name not in found:
                found.append(name)
        covered = end
    return found
