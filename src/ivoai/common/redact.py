"""Redaction of credentials in any text ivoai prints, logs or returns in an error."""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

# Order matters: longer, more specific forms first.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "pem_private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
    ),
    (
        "authorization_header",
        re.compile(r"(?i)\b(authorization\s*[:=]\s*)(?:bearer|basic|token)\s+[^\s\"',;]+"),
    ),
    ("bearer", re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]{8,}=*")),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{8,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}")),
    ("github_token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}")),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    (
        "aws_secret",
        re.compile(r"(?i)(aws_secret_access_key\s*[=:]\s*)[\"']?[A-Za-z0-9/+=]{40}[\"']?"),
    ),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}")),
    (
        "labelled_secret",
        re.compile(
            r"(?i)\b((?:enrollment[_ -]?code|code|credential|access[_-]?token|refresh[_-]?token|api[_-]?key|"
            r"client[_-]?secret|password|secret|token)\"?\s*[:=]\s*\"?)[A-Za-z0-9\-._~+/]{16,}=*"
        ),
    ),
)


def redact(text: str) -> str:
    """Replace every recognised credential form in `text` with a marker."""
    for _name, pattern in _PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def find_secrets(text: str) -> list[str]:
    """Names of the credential forms found in `text` (for classification; never the values)."""
    return [name for name, pattern in _PATTERNS if pattern.search(text)]
