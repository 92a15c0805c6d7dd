"""Credential detection over up to 16 MiB of raw bytes, fast enough to run on every artifact.

The authority is `ivoai.common.redact.find_secrets` (its `_PATTERNS`) plus a few raw-auth forms
added here (Slack, Google, npm and Stripe keys): `scan_bytes(data)` returns exactly the names those
Python patterns report over `data.decode("latin-1")` (one character per byte, so binary payloads
are scanned too), in the same order. Only the speed differs.

Running the Python patterns over 16 MiB takes seconds, so the payload is scanned in one pass by
RE2 (a DFA, linear time, no backtracking) with all detectors joined into one alternation, each a
capture group. Each RE2 form is a translation of its Python pattern over Latin-1 that matches
wherever the Python pattern matches:

- `\\b` before a word character becomes "start of text or one non-word character" (consumed, as
  RE2 has no look-behind); `\\b` after one becomes "end of text or one non-word character". The
  word and space sets are computed from Python's own `\\w` and `\\s` over all 256 Latin-1 code
  points, so Unicode rules (`é` is a word character, `\\xa0` a space) carry over exactly.
- An unbounded repeat at the end of a pattern is cut to its minimum (`{16,}` -> `{16}`): only
  existence matters. The PEM body (`.*?(END|\\Z)`) always matches once the header does.

A hit is only a candidate: the Python pattern itself is then run at the hit (`match` at the hit
and one character later, with the whole payload as context) and decides. The RE2 forms are pinned
to the Python source they were written for: a pattern whose source changed, or a new one, has no
RE2 form and is searched with Python over the whole text (slow, never wrong); so is every pattern
if the `re2` module cannot be imported. Should RE2 hits keep failing that check
(ARTIFACT_SCAN_MAX_ANCHOR_HITS of them), the remaining detectors fall back to that whole-text
search too. The bearer rule's look-ahead ("a digit somewhere in the token") is spelled out as an
alternation. Nothing here ever cuts the payload into windows, so a credential is found wherever
it sits.

From ARTIFACT_SCAN_PREFILTER_MIN_BYTES on, Hyperscan (Vectorscan: SIMD multi-pattern matching, the
engine secret scanners use) runs first over the same RE2 forms, byte for byte, and reports which
forms occur anywhere in the payload (the first match of each; `HS_FLAG_SINGLEMATCH`). A form that
never occurs cannot produce a candidate, so only the forms it found go on to the RE2 union and the
Python authority above; a clean 16 MiB payload is decided by that one pass (~4x faster than the RE2
union on two-core machines). The prefilter only removes work: a form Hyperscan cannot compile, or a
missing `hyperscan` module, leaves every form to RE2.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass, field
from typing import Any

try:
    import re2  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - google-re2 is a dependency with wheels for common platforms
    re2 = None  # every detector then searches with Python: exact, slow

try:
    import hyperscan
except ImportError:  # pragma: no cover - a dependency with wheels for Linux and macOS (x86-64, arm64)
    hyperscan = None  # type: ignore[assignment]  # no prefilter: every form goes to the RE2 union

from ivoai.common.limits import ARTIFACT_SCAN_MAX_ANCHOR_HITS, ARTIFACT_SCAN_PREFILTER_MIN_BYTES, MIB
from ivoai.common.redact import _ACCEPTS, _PATTERNS, accepted_matches

# RE2's memory budget for one compiled union, its DFA cache included (RE2's default; 4-64 MiB
# measured the same on 16 MiB of logs, random bytes, base64 and hex). A full cache is flushed
# and rebuilt, or RE2 falls back to its NFA: slower, never a different answer.
_RE2_MAX_MEM = 8 * MIB


def _latin1_set(probe: str) -> bytes:
    """The Latin-1 code points Python's `probe` class (`\\w`, `\\s`) matches, as an RE2 class body."""
    rx = re.compile(probe)
    return b"".join(b"\\x%02x" % c for c in range(256) if rx.fullmatch(chr(c)))


_WORD = _latin1_set(r"\w")
_SPACE = _latin1_set(r"\s")
_PLACEHOLDERS = {
    b"{B}": b"(?:^|[^" + _WORD + b"])",  # \b before a word character
    b"{E}": b"(?:\\z|[^" + _WORD + b"])",  # \b after a word character
    b"{S}": _SPACE,  # the body of a class: [{S}] is \s, [^{S}...] excludes it
}

# The extra raw-auth forms (not in common.redact, so nothing else redacts them differently).
_EXTRA: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("slack_token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}")),
    ("stripe_key", re.compile(r"\b[rs]k_live_[A-Za-z0-9]{16,}")),
)


def _digit_within(other: bytes, any_: bytes, least: int) -> bytes:
    """RE2 for a run of `any_` at least `least` long containing a digit (`other` = `any_` minus digits)."""
    # No `{0}` repeat (Hyperscan rejects it): the first branch is the digit itself.
    branches = [(other + b"{%d}" % i if i else b"") + b"[0-9]"
                + (any_ + b"{%d}" % (least - 1 - i) if i < least - 1 else b"")
                for i in range(least)]  # fmt: skip
    return b"|".join([*branches, other + b"{%d,}[0-9]" % least])


# name -> (the Python source and flags this form was written for, the RE2 form over Latin-1).
_RE2_FORMS: dict[str, tuple[str, int, bytes]] = {
    "pem_private_key": (
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
        re.DOTALL,
        rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----",
    ),
    "authorization_header": (
        r"(?i)\b(?P<keep>(?:proxy-)?authorization\s*[:=]\s*(?:bearer|basic|token)\s+)(?![<$%{\[])[^\s\"',;]+",
        0,
        rb"{B}(?i:(?:proxy-)?authorization)[{S}]*[:=][{S}]*(?i:bearer|basic|token)[{S}]+[^{S}\"',;<$%{\[]",
    ),
    "bearer": (
        r"(?i)\b(?P<keep>bearer\s+)(?=[A-Za-z\-._~+/]*[0-9])[A-Za-z0-9\-._~+/]{8,}=*",
        0,
        # The look-ahead wants a digit in the token: spelled out as "the first digit at index i".
        rb"{B}(?i:bearer)[{S}]+(?:" + _digit_within(rb"[A-Za-z\-._~+/]", rb"[A-Za-z0-9\-._~+/]", 8) + rb")",
    ),
    "anthropic_key": (r"\bsk-ant-[A-Za-z0-9_\-]{8,}", 0, rb"{B}sk-ant-[A-Za-z0-9_\-]{8}"),
    "openai_key": (
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}",
        0,
        rb"{B}sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16}",
    ),
    "github_token": (
        r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}",
        0,
        rb"{B}(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20}",
    ),
    "ivoai_credential": (r"\bivc_[A-Za-z0-9_\-]{20,}", 0, rb"{B}ivc_[A-Za-z0-9_\-]{20}"),
    "aws_access_key": (r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", 0, rb"{B}(?:AKIA|ASIA)[A-Z0-9]{16}{E}"),
    "aws_secret": (
        r"(?i)(?P<keep>aws_secret_access_key\s*[=:]\s*)[\"']?[A-Za-z0-9/+=]{40}[\"']?",
        0,
        rb"(?i:aws_secret_access_key)[{S}]*[=:][{S}]*[\"']?[A-Za-z0-9/+=]{40}",
    ),
    "jwt": (
        r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}",
        0,
        rb"{B}eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5}",
    ),
    "labelled_secret": (
        r"(?i)\b(?P<keep>(?:enrollment[_ -]?code|code|credential|access[_-]?token|refresh[_-]?token|"
        r"api[_-]?key|client[_-]?secret|password|secret|token)\"?\s*[:=]\s*\"?)[A-Za-z0-9\-._~+/]{16,}=*",
        0,
        rb"{B}(?i:enrollment[_ -]?code|code|credential|access[_-]?token|refresh[_-]?token|"
        rb"api[_-]?key|client[_-]?secret|password|secret|token)\"?[{S}]*[:=][{S}]*\"?[A-Za-z0-9\-._~+/]{16}",
    ),
    "slack_token": (r"\bxox[abprs]-[A-Za-z0-9-]{10,}", 0, rb"{B}xox[abprs]-[A-Za-z0-9-]{10}"),
    "google_api_key": (r"\bAIza[0-9A-Za-z_\-]{35}", 0, rb"{B}AIza[0-9A-Za-z_\-]{35}"),
    "npm_token": (r"\bnpm_[A-Za-z0-9]{36}", 0, rb"{B}npm_[A-Za-z0-9]{36}"),
    "stripe_key": (r"\b[rs]k_live_[A-Za-z0-9]{16,}", 0, rb"{B}[rs]k_live_[A-Za-z0-9]{16}"),
}


@dataclass(frozen=True)
class _Detector:
    name: str
    pattern: re.Pattern[str]  # the authority, over the Latin-1 text
    fast: bytes | None  # its RE2 form, or None: searched with `pattern` over the whole text

    def accepts(self, match: re.Match[str] | None) -> bool:
        """The authority's verdict on one match (a rule may refuse a match: see redact's `accept`)."""
        if match is None:
            return False
        accept = _ACCEPTS.get(self.name)
        return accept is None or accept(match)

    def search(self, text: str) -> bool:
        """Whether the authority finds this form anywhere in `text`."""
        if self.name not in _ACCEPTS:
            return self.pattern.search(text) is not None
        return next(accepted_matches(self.pattern, self.accepts, text), None) is not None


def _expand(form: bytes) -> bytes:
    for key, value in _PLACEHOLDERS.items():
        form = form.replace(key, value)
    return form


def _detector(name: str, pattern: re.Pattern[str]) -> _Detector:
    pinned = _RE2_FORMS.get(name)
    if pinned is None or re2 is None:
        return _Detector(name, pattern, None)
    source, flags, form = pinned
    if pattern.pattern != source or pattern.flags != re.compile(source, flags).flags:
        return _Detector(name, pattern, None)  # redact changed this rule: stay exact, lose speed
    return _Detector(name, pattern, _expand(form))


DETECTORS: tuple[_Detector, ...] = tuple(_detector(name, pattern) for name, pattern in _PATTERNS + _EXTRA)


def _options() -> Any:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.max_mem = _RE2_MAX_MEM
    options.log_errors = False
    return options


@functools.lru_cache(maxsize=16)  # the full union, then one per set of still-unconfirmed detectors
def _union(names: tuple[str, ...]) -> Any:
    """One RE2 alternation of the named detectors' forms, group i+1 being names[i]."""
    by_name = {d.name: d for d in DETECTORS}
    source = b"|".join(b"(" + (by_name[n].fast or b"") + b")" for n in names)
    return re2.compile(source, _options())


def _authority_at(det: _Detector, text: str, start: int) -> bool:
    """Whether `det` matches at `start` or one character later (an RE2 form may consume the `\\b`)."""
    return det.accepts(det.pattern.match(text, start)) or det.accepts(det.pattern.match(text, start + 1))


def _group_index(match: Any, count: int) -> int:
    for i in range(1, count + 1):
        if match.start(i) >= 0:
            return i - 1
    raise AssertionError("RE2 union matched without a group")  # pragma: no cover - RE2 invariant


# Payloads from this size go through the Hyperscan prefilter first (a module attribute: tests lower it).
PREFILTER_MIN_BYTES = ARTIFACT_SCAN_PREFILTER_MIN_BYTES


@dataclass(frozen=True)
class _Prefilter:
    database: Any  # hyperscan.Database (block mode), expression id i = names[i]
    names: tuple[str, ...]
    unfiltered: frozenset[str]  # forms Hyperscan cannot compile: always left to RE2
    # Hyperscan scratch space is per scan in flight: the database's own one would be shared by
    # threads scanning at once (the scan releases the GIL), so each thread gets its own.
    scratches: threading.local = field(default_factory=threading.local)

    def scratch(self) -> Any:
        own = getattr(self.scratches, "scratch", None)
        if own is None:
            own = self.scratches.scratch = hyperscan.Scratch(self.database)
        return own


def _hs_database(forms: list[bytes]) -> Any:
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(
        expressions=forms,
        ids=list(range(len(forms))),
        elements=len(forms),
        flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(forms),
    )
    return database


@functools.lru_cache(maxsize=4)  # keyed by the forms themselves: a test may swap DETECTORS
def _prefilter(forms: tuple[tuple[str, bytes], ...]) -> _Prefilter | None:
    """One Hyperscan database over the RE2 forms, or None without Hyperscan."""
    if hyperscan is None or not forms:
        return None
    usable: list[tuple[str, bytes]] = []
    unfiltered: set[str] = set()
    for name, form in forms:
        try:
            _hs_database([form])
        except hyperscan.error:
            unfiltered.add(name)  # e.g. a construct Hyperscan lacks: RE2 alone, as without the prefilter
        else:
            usable.append((name, form))
    if not usable:
        return None
    database = _hs_database([form for _, form in usable])
    return _Prefilter(database, tuple(name for name, _ in usable), frozenset(unfiltered))


def _occurring(data: bytes | bytearray | memoryview, detectors: tuple[_Detector, ...]) -> set[str] | None:
    """Names of the detectors whose RE2 form matches somewhere in `data`, or None without a prefilter."""
    prefilter = _prefilter(tuple((d.name, d.fast) for d in detectors if d.fast is not None))
    if prefilter is None:
        return None
    present = set(prefilter.unfiltered)

    def on_match(expression: int, _start: int, _end: int, _flags: int, _context: object) -> bool | None:
        present.add(prefilter.names[expression])
        return None  # keep scanning: each form is reported once (HS_FLAG_SINGLEMATCH)

    prefilter.database.scan(data, match_event_handler=on_match, scratch=prefilter.scratch())
    return present


def scan_bytes(data: bytes | bytearray | memoryview) -> list[str]:
    """Names of the credential forms found in `data` (never the values), in detector order."""
    found: set[str] = set()
    slow = [d for d in DETECTORS if d.fast is None]
    remaining = tuple(d for d in DETECTORS if d.fast is not None)
    if memoryview(data).nbytes >= PREFILTER_MIN_BYTES:
        occurring = _occurring(data, remaining)
        if occurring is not None:
            remaining = tuple(d for d in remaining if d.name in occurring)
    text: str | None = None  # decoded only once something needs the authority
    pos = 0
    refuted = 0
    while remaining:
        names = tuple(d.name for d in remaining)
        hit = _union(names).search(data, pos)
        if hit is None:
            break
        start = hit.start()
        det = remaining[_group_index(hit, len(names))]
        if text is None:
            text = bytes(data).decode("latin-1")
        if _authority_at(det, text, start):
            found.add(det.name)
            pos = start
        else:
            # The RE2 form matched where its Python pattern does not: settle this position for
            # every remaining detector with the authority, then move past it.
            refuted += 1
            found.update(d.name for d in remaining if _authority_at(d, text, start))
            pos = start + 1
            if refuted > ARTIFACT_SCAN_MAX_ANCHOR_HITS:
                slow.extend(d for d in remaining if d.name not in found)
                break
        # A confirmed detector leaves the union; the search resumes at the same position so
        # another detector matching there too is still seen.
        remaining = tuple(d for d in remaining if d.name not in found)
    for det in slow:
        if det.name in found:
            continue
        if text is None:
            text = bytes(data).decode("latin-1")
        if det.search(text):
            found.add(det.name)
    return [d.name for d in DETECTORS if d.name in found]
