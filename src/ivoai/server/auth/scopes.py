"""Scope parsing and policy shared by enrollment, OAuth and the tool boundary."""

from __future__ import annotations

from collections.abc import Iterable

from ivoai.common.errors import ValidationError
from ivoai.common.protocol import (
    ALL_SCOPES,
    SCOPE_CONTEXT_READ,
    SCOPE_MEMORY_DELETE,
    SCOPE_MEMORY_READ,
    SCOPE_MEMORY_WRITE,
)

# What a Web connector (ChatGPT, Claude) may be granted: context and memory, never admin reads by default.
WEB_SCOPES = (SCOPE_CONTEXT_READ, SCOPE_MEMORY_READ, SCOPE_MEMORY_WRITE, SCOPE_MEMORY_DELETE)
WEB_DEFAULT_SCOPES = (SCOPE_CONTEXT_READ, SCOPE_MEMORY_READ, SCOPE_MEMORY_WRITE)


def parse_scopes(
    value: str | Iterable[str] | None, *, default: Iterable[str], field: str = "scopes"
) -> list[str]:
    """Normalize a space/comma-separated scope list (or an iterable) to sorted unique known scopes.

    Raises:
        ValidationError: an unknown scope is named (the message lists the known ones).
    """
    if value is None:
        items = list(default)
    elif isinstance(value, str):
        items = [s for s in value.replace(",", " ").split() if s]
    else:
        items = [s.strip() for s in value if s.strip()]
    if not items:
        raise ValidationError(f"{field}: at least one scope is required (known: {' '.join(ALL_SCOPES)})")
    unknown = sorted(set(items) - set(ALL_SCOPES))
    if unknown:
        raise ValidationError(
            f"{field}: unknown scope(s) {', '.join(unknown)} (known: {' '.join(ALL_SCOPES)})"
        )
    return sorted(set(items))


def has_scope(granted: Iterable[str], required: str) -> bool:
    """True when `required` is among the granted scopes (no scope implies another)."""
    return required in set(granted)
