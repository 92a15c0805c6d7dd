"""The records and errors of the OAuth store (`oauth_store.py`): plain values, no storage logic."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ivoai.common.errors import IvoaiError
from ivoai.server.auth.enrollment import CodeRecord

Clock = Callable[[], float]

ACTIVATION_REJECTED = "activation code is invalid, expired, already used or revoked"


class ActivationRejected(IvoaiError):
    """The one uniform answer to an unusable activation code."""

    code = "activation_rejected"


class GrantReplayed(IvoaiError):
    """A consumed authorization code or a rotated refresh token was presented again; its grant is revoked."""

    code = "grant_replayed"


class PendingExpired(IvoaiError):
    """The consent request expired, was displaced, or was already decided."""

    code = "pending_expired"


class ClientLimitReached(IvoaiError):
    """Every slot for clients with a grant is taken by clients whose grants are still live."""

    code = "temporarily_unavailable"


@dataclass(frozen=True)
class RegisteredClient:
    client_id: str
    secret_sha256: str | None
    metadata: dict[str, Any]
    created_at: float
    used_at: float | None = None  # when its first grant was approved; None: an unused registration


class ActivationRecord(CodeRecord):
    """A Web consent activation code: the same one-time record as an enrollment code."""


@dataclass(frozen=True)
class GrantRecord:
    grant_id: str
    client_id: str
    activation_id: str
    scopes: list[str]
    resource: str
    created_at: float
    revoked_at: float | None = None
    revoke_reason: str | None = None


@dataclass(frozen=True)
class AuthCodeRecord:
    grant_id: str
    client_id: str
    scopes: list[str]
    expires_at: float
    code_challenge: str
    redirect_uri: str
    redirect_uri_provided_explicitly: bool
    resource: str
    consumed_at: float | None = None


@dataclass(frozen=True)
class TokenRecord:
    kind: Literal["access", "refresh"]
    grant_id: str
    client_id: str
    scopes: list[str]
    resource: str
    expires_at: float
    rotated_at: float | None = None


@dataclass
class PendingAuthorization:
    """An authorization request waiting on the consent page for the administrator's activation code.

    `scopes` is exactly what the consent page shows and what approval grants. `activation_id` is set
    when an activation code allowed only part of the request: the page then asks to confirm the
    narrower grant, and approval uses that (still unconsumed) code.
    """

    request_id: str
    client_id: str
    client_name: str
    redirect_uri: str
    redirect_uri_provided_explicitly: bool
    scopes: list[str]
    state: str | None
    code_challenge: str
    resource: str
    created_at: float
    attempts: int = 0
    activation_id: str | None = None


@dataclass(frozen=True)
class IssuedTokens:
    access_token: str
    refresh_token: str
    expires_in: int
    scopes: list[str]


@dataclass(frozen=True)
class CreatedActivation:
    id: str
    code: str
    expires_at: float
    scopes: list[str]
