"""Bounded, redacted one-line reasons shared by the core contracts."""

from __future__ import annotations

from ivoai.common.limits import REASON_MAX_CHARS
from ivoai.common.redact import redact


def bounded_reason(text: str | None) -> str | None:
    """One redacted line of at most REASON_MAX_CHARS characters (None stays None)."""
    if text is None:
        return None
    line = " ".join(redact(text).split())
    if len(line) > REASON_MAX_CHARS:
        line = line[: REASON_MAX_CHARS - 1] + "…"
    return line
