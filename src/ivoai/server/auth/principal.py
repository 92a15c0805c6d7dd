"""Who is calling: the principal a bearer gate attaches to a request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Principal:
    """`native` (an enrolled client's credential) or `oauth` (a Web connector's grant)."""

    kind: Literal["native", "oauth"]
    client_id: str
    scopes: frozenset[str]
    subject: str | None = None  # the OAuth grant; stateful MCP sessions are bound to it
