"""Redaction of credentials in any text ivoai prints, logs or returns in an error.

Each rule recognises one credential form and replaces the secret part with `[REDACTED]`, keeping
any label (`Authorization: Bearer `, `password=`) so the message still says what was removed.
Rules run in order: longer, more specific forms first.

Two uses, two sets: `redact()` applies every rule (output may lose a harmless token, never leak
one); `find_secrets()` classifies content (refusing a memory page, skipping a document) and uses
only the precise rules (`_DETECT`, also exported as `_PATTERNS` for the artifact store's byte
scanner); a rule's `accept` judges each match's value, so a labelled identifier
(`code = "connector_not_found"`) is neither reported nor redacted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

REDACTED = "[REDACTED]"

_B64URL = r"A-Za-z0-9_\-"


class _Rule:
    """One credential form. A plain class, not a dataclass: the memory hook runner imports this module
    in every hook process, and `dataclasses` (with `inspect`) would double its import cost."""

    __slots__ = ("accept", "detect", "name", "pattern")

    def __init__(
        self,
        name: str,
        pattern: re.Pattern[str],
        detect: bool = True,  # also used by find_secrets / _PATTERNS
        # Decides whether a match is a secret (default: always); keeps bare-token rules off prose.
        accept: Callable[[str], bool] | None = None,
    ) -> None:
        self.name = name
        self.pattern = pattern
        self.detect = detect
        self.accept = accept

    def accepts(self, match: re.Match[str]) -> bool:
        """Whether this match is a secret: `accept` judges the value (the match without its label)."""
        if self.accept is None:
            return True
        keep = match.groupdict().get("keep") or ""
        return self.accept(match.group(0)[len(keep) :])

    def replace(self, match: re.Match[str]) -> str:
        groups = match.groupdict()
        return (groups.get("keep") or "") + REDACTED + (groups.get("tail") or "")

    def apply(self, text: str) -> str:
        """`text` with every accepted match replaced."""
        if self.accept is None:
            return self.pattern.sub(self.replace, text)
        out: list[str] = []
        end = 0
        for match in accepted_matches(self.pattern, self.accepts, text):
            out += (text[end : match.start()], self.replace(match))
            end = match.end()
        return "".join(out) + text[end:] if out else text


def accepted_matches(
    pattern: re.Pattern[str], accepts: Callable[[re.Match[str]], bool], text: str
) -> Iterator[re.Match[str]]:
    """The matches of `pattern` in `text` that `accepts` takes, left to right, without overlap. A refused
    match is retried one character later, not after its end: a refused value may swallow the next
    label (`refresh_token:abcdefghijklmnopqrst.client_secret = <secret>`), which `finditer` would skip."""
    pos = 0
    while (match := pattern.search(text, pos)) is not None:
        if accepts(match):
            yield match
            pos = match.end() if match.end() > match.start() else match.start() + 1
        else:
            pos = match.start() + 1


def _not_an_identifier(value: str) -> bool:
    """False for a dotted or snake_case name (`connector_not_found`, `ivoai.client.process`,
    `IVOAI_MCP_TOKEN_1`): two or more parts split at `_` or `.`, each letters only or a short number.
    Such values sit after `code =` or `token:` in ordinary source and docs; credentials do not look
    like that. A single unbroken word, or hyphenated blocks (`ABCD-EFGH-IJKL-MNOP`, the shape of
    human-readable codes), is still treated as a secret."""
    parts = [p for p in re.split(r"[_.]", value.rstrip("=")) if p]
    if len(parts) < 2:
        return True
    return not all(p.isalpha() or (p.isdigit() and len(p) <= 3) for p in parts)


def _mixed_case_with_digits(token: str) -> bool:
    has_digit = any(c.isdigit() for c in token)
    return has_digit and any(c.isupper() for c in token) and any(c.islower() for c in token)


_RULES: tuple[_Rule, ...] = (
    _Rule(
        "pem_private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
    ),
    _Rule(
        "authorization_header",
        # A placeholder (`<token>`, `$TOKEN`, `${TOKEN}`, `{token}`, `[token]`) is documentation.
        re.compile(
            r"(?i)\b(?P<keep>(?:proxy-)?authorization\s*[:=]\s*(?:bearer|basic|token)\s+)(?![<$%{\[])[^\s\"',;]+"
        ),
    ),
    _Rule(
        "secret_header",
        re.compile(r"(?im)\b(?P<keep>(?:x-api-key|cookie|set-cookie|chatgpt-account-id)\s*:\s*)[^\r\n]+"),
        detect=False,
    ),
    # Redaction takes any bearer-looking word; detection (refusing or skipping content) also wants a
    # digit, so prose such as `WWW-Authenticate: Bearer resource_metadata="…"` in docs is not a secret.
    _Rule("bearer", re.compile(r"(?i)\b(?P<keep>bearer\s+)[A-Za-z0-9\-._~+/]{8,}=*"), detect=False),
    _Rule(
        "bearer",
        re.compile(r"(?i)\b(?P<keep>bearer\s+)(?=[A-Za-z\-._~+/]*[0-9])[A-Za-z0-9\-._~+/]{8,}=*"),
    ),
    _Rule(
        "url_credentials",
        re.compile(r"(?i)\b(?P<keep>[a-z][a-z0-9+.\-]*://[^/\s:@]+:)[^@\s/]+(?P<tail>@)"),
        detect=False,
    ),
    _Rule("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{8,}")),
    _Rule("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}")),
    _Rule("github_token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}")),
    _Rule("ivoai_credential", re.compile(r"\bivc_[A-Za-z0-9_\-]{20,}")),
    _Rule("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    _Rule(
        "aws_secret",
        re.compile(r"(?i)(?P<keep>aws_secret_access_key\s*[=:]\s*)[\"']?[A-Za-z0-9/+=]{40}[\"']?"),
    ),
    _Rule("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}")),
    _Rule(
        "labelled_secret",
        re.compile(
            r"(?i)\b(?P<keep>(?:enrollment[_ -]?code|code|credential|access[_-]?token|refresh[_-]?token|"
            r"api[_-]?key|client[_-]?secret|password|secret|token)\"?\s*[:=]\s*\"?)[A-Za-z0-9\-._~+/]{16,}=*"
        ),
        accept=_not_an_identifier,
    ),
    # A bare 256-bit base64url token (enrollment and activation codes, router tokens): exactly 43
    # characters mixing digits and both cases, so hex digests and ordinary words are left alone.
    _Rule(
        "random_token",
        re.compile(rf"(?<![{_B64URL}])[{_B64URL}]{{43}}(?![{_B64URL}])"),
        detect=False,
        accept=_mixed_case_with_digits,
    ),
)

# The precise detection rules (see the module docstring), and the same as (name, pattern) pairs
# for the artifact store's byte scanner (client/workingcontext/_secrets.py), which compiles them to
# bytes (keep their patterns ASCII-only) and asks `_ACCEPTS` about each match it confirms.
_DETECT: tuple[_Rule, ...] = tuple(r for r in _RULES if r.detect)
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((r.name, r.pattern) for r in _DETECT)
_ACCEPTS: dict[str, Callable[[re.Match[str]], bool]] = {r.name: r.accepts for r in _DETECT if r.accept}


def redact(text: str) -> str:
    """Replace every recognised credential form in `text` with a marker."""
    for rule in _RULES:
        text = rule.apply(text)
    return text


def find_secrets(text: str) -> list[str]:
    """Names of the credential forms found in `text` (for classification; never the values)."""
    return [r.name for r in _DETECT if next(accepted_matches(r.pattern, r.accepts, text), None) is not None]
