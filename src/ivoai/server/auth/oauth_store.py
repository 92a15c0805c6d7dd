"""OAuth 2.1 persistence for the Web MCP endpoint: `DATA/oauth/state.json`.

Only SHA-256 hashes of activation codes, authorization codes, access tokens, refresh tokens and
client secrets are stored. Every mutation is locked and atomic (see `_state.StateFile`).

A *grant* is one approved authorization (one consent with one activation code). Its authorization
code, access tokens and rotating refresh tokens all point at it, so revoking the grant revokes
everything it issued. That is what happens when:

- an authorization code is presented a second time (replay, or the loser of two concurrent
  redemptions);
- a refresh token that was already rotated is presented again (RFC 9700 §4.14.2: the whole family);
- the client calls the revocation endpoint with any of its tokens;
- the administrator revokes the activation code the grant was approved with.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ivoai.common.errors import IvoaiError, NotFoundError, ValidationError
from ivoai.common.ids import constant_time_equal, random_id, random_token, sha256_hex
from ivoai.common.limits import (
    OAUTH_ACCESS_TTL_SECONDS,
    OAUTH_CODE_TTL_SECONDS,
    OAUTH_MAX_CLIENTS,
    OAUTH_REFRESH_TTL_SECONDS,
    WEB_ACCESS_TTL_DEFAULT_SECONDS,
    WEB_ACCESS_TTL_MAX_SECONDS,
)
from ivoai.server.auth._state import StateFile
from ivoai.server.auth.enrollment import CodeRecord, parse_ttl
from ivoai.server.auth.scopes import WEB_DEFAULT_SCOPES, parse_scopes

ACCESS_PREFIX = "ivo_at_"
REFRESH_PREFIX = "ivo_rt_"
CODE_PREFIX = "ivo_ac_"
ACTIVATION_REJECTED = "activation code is invalid, expired, already used or revoked"

Clock = Callable[[], float]


class ActivationRejected(IvoaiError):
    """The one uniform answer to an unusable activation code."""

    code = "activation_rejected"


class GrantReplayed(IvoaiError):
    """A consumed authorization code or a rotated refresh token was presented again; its grant is revoked."""

    code = "grant_replayed"


class RegisteredClient(BaseModel):
    client_id: str
    secret_sha256: str | None = None
    metadata: dict[str, Any]
    created_at: float


class ActivationRecord(CodeRecord):
    """A Web consent activation code: the same one-time record as an enrollment code."""


class GrantRecord(BaseModel):
    grant_id: str
    client_id: str
    activation_id: str
    scopes: list[str]
    resource: str
    created_at: float
    revoked_at: float | None = None
    revoke_reason: str | None = None


class AuthCodeRecord(BaseModel):
    grant_id: str
    client_id: str
    scopes: list[str]
    expires_at: float
    code_challenge: str
    redirect_uri: str
    redirect_uri_provided_explicitly: bool
    resource: str
    consumed_at: float | None = None


class TokenRecord(BaseModel):
    kind: Literal["access", "refresh"]
    grant_id: str
    client_id: str
    scopes: list[str]
    resource: str
    expires_at: float
    rotated_at: float | None = None


class OAuthState(BaseModel):
    version: int = 1
    clients: dict[str, RegisteredClient] = Field(default_factory=dict)
    activations: list[ActivationRecord] = Field(default_factory=list)
    grants: dict[str, GrantRecord] = Field(default_factory=dict)
    codes: dict[str, AuthCodeRecord] = Field(default_factory=dict)
    tokens: dict[str, TokenRecord] = Field(default_factory=dict)


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


class OAuthStore:
    """The OAuth state file and every transition on it (synchronous; call from a worker thread)."""

    def __init__(self, data_root: Path, oauth_dir: Path, *, clock: Clock = time.time) -> None:
        self._file: StateFile[OAuthState] = StateFile(data_root, oauth_dir / "state.json", OAuthState)
        self.clock = clock

    # -- clients ----------------------------------------------------------------------------------
    def register_client(self, client_id: str, metadata: dict[str, Any], secret: str | None) -> None:
        """Store a dynamically registered client (its secret only as a hash).

        Raises:
            ValidationError: the registration limit is reached.
        """

        def change(state: OAuthState) -> None:
            if len(state.clients) >= OAUTH_MAX_CLIENTS:
                self._prune_clients(state)
            if len(state.clients) >= OAUTH_MAX_CLIENTS:
                raise ValidationError(f"client registration limit reached ({OAUTH_MAX_CLIENTS})")
            state.clients[client_id] = RegisteredClient(
                client_id=client_id,
                secret_sha256=sha256_hex(secret) if secret else None,
                metadata=metadata,
                created_at=self.clock(),
            )

        self._file.mutate(change)

    def _prune_clients(self, state: OAuthState) -> None:
        """Forget registered clients older than a day that never obtained a live grant."""
        horizon = self.clock() - 86400
        live = {g.client_id for g in state.grants.values() if g.revoked_at is None}
        for cid in [
            c.client_id for c in state.clients.values() if c.created_at < horizon and c.client_id not in live
        ]:
            del state.clients[cid]

    def get_client(self, client_id: str) -> RegisteredClient | None:
        """A registered client by ID."""
        return self._file.read().clients.get(client_id)

    # -- activation codes -------------------------------------------------------------------------
    def create_activation(
        self, *, ttl: str | int | None = None, scopes: list[str] | str | None = None
    ) -> CreatedActivation:
        """A one-time activation code for the consent page; shown once, stored as a hash.

        Raises:
            ValidationError: bad TTL or scopes.
        """
        seconds = parse_ttl(ttl, default=WEB_ACCESS_TTL_DEFAULT_SECONDS, maximum=WEB_ACCESS_TTL_MAX_SECONDS)
        granted = parse_scopes(scopes, default=WEB_DEFAULT_SCOPES)
        code = random_token(32)
        now = self.clock()
        record = ActivationRecord(
            id=random_id("web", 8),
            code_sha256=sha256_hex(code),
            created_at=now,
            expires_at=now + seconds,
            scopes=granted,
        )
        self._file.mutate(lambda state: state.activations.append(record))
        return CreatedActivation(id=record.id, code=code, expires_at=record.expires_at, scopes=granted)

    def list_activations(self) -> list[ActivationRecord]:
        """Every activation code record (metadata)."""
        return list(self._file.read().activations)

    def activation_status(self, record: ActivationRecord) -> str:
        """`open`, `consumed`, `revoked` or `expired`."""
        if record.revoked_at is not None:
            return "revoked"
        if record.consumed_at is not None:
            return "consumed"
        return "expired" if record.expires_at <= self.clock() else "open"

    def revoke_activation(self, activation_id: str) -> ActivationRecord:
        """Revoke an activation code and every grant approved with it.

        Raises:
            NotFoundError: unknown ID.
        """

        def change(state: OAuthState) -> ActivationRecord:
            now = self.clock()
            for record in state.activations:
                if record.id == activation_id:
                    if record.revoked_at is None:
                        record.revoked_at = now
                    for grant in state.grants.values():
                        if grant.activation_id == activation_id and grant.revoked_at is None:
                            grant.revoked_at, grant.revoke_reason = now, "activation revoked"
                    return record.model_copy()
            raise NotFoundError(
                f"no web-access code with ID {activation_id!r} (see `ivoai server web-access list`)"
            )

        return self._file.mutate(change)

    def check_activation(self, code: str) -> ActivationRecord:
        """The open activation record for `code` (not consumed).

        Raises:
            ActivationRejected: uniform error for any unusable code.
        """
        digest = sha256_hex(code)
        now = self.clock()
        match: ActivationRecord | None = None
        for record in self._file.read().activations:
            if constant_time_equal(record.code_sha256, digest) and match is None:
                match = record
        if match is None or self.activation_status(match) != "open" or match.expires_at <= now:
            raise ActivationRejected(ACTIVATION_REJECTED)
        return match

    # -- authorization codes ----------------------------------------------------------------------
    def approve(
        self,
        *,
        activation_code: str,
        client_id: str,
        requested_scopes: list[str] | None,
        code_challenge: str,
        redirect_uri: str,
        redirect_uri_provided_explicitly: bool,
        resource: str,
    ) -> tuple[str, list[str]]:
        """Consume the activation code, create a grant and its authorization code; return (code, scopes).

        The grant never exceeds the activation code's scopes: requested scopes (or, without an
        explicit request, the client's registered ones) are narrowed to them (RFC 6749 §3.3 lets the
        server issue fewer scopes than requested; the token response names what was granted).
        Clients such as the MCP SDK's request every `scopes_supported`, so refusing instead of
        narrowing would break the default flow.

        Raises:
            ActivationRejected: the activation code is unusable (nothing is consumed).
            ValidationError: code `invalid_scope`: nothing requested was activated.
        """
        digest = sha256_hex(activation_code)
        code = CODE_PREFIX + random_token(32)

        def change(state: OAuthState) -> tuple[str, list[str]]:
            now = self.clock()
            match: ActivationRecord | None = None
            for record in state.activations:
                if constant_time_equal(record.code_sha256, digest) and match is None:
                    match = record
            if match is None or self.activation_status(match) != "open":
                raise ActivationRejected(ACTIVATION_REJECTED)
            allowed = set(match.scopes)
            client = state.clients.get(client_id)
            if client is None:
                raise ActivationRejected(ACTIVATION_REJECTED)
            if requested_scopes is not None:
                wanted = set(requested_scopes)
            else:
                wanted = set(str(client.metadata.get("scope") or " ".join(WEB_DEFAULT_SCOPES)).split())
            scopes = sorted(wanted & allowed)
            if not scopes:
                raise ValidationError(
                    f"none of the requested scopes ({' '.join(sorted(wanted))}) is allowed by the activation "
                    f"code ({' '.join(sorted(allowed))})",
                    code="invalid_scope",
                )
            match.consumed_at, match.client_id = now, client_id
            grant = GrantRecord(
                grant_id=random_id("grt", 8),
                client_id=client_id,
                activation_id=match.id,
                scopes=scopes,
                resource=resource,
                created_at=now,
            )
            state.grants[grant.grant_id] = grant
            state.codes[sha256_hex(code)] = AuthCodeRecord(
                grant_id=grant.grant_id,
                client_id=client_id,
                scopes=scopes,
                expires_at=now + OAUTH_CODE_TTL_SECONDS,
                code_challenge=code_challenge,
                redirect_uri=redirect_uri,
                redirect_uri_provided_explicitly=redirect_uri_provided_explicitly,
                resource=resource,
            )
            self._prune(state, now)
            return code, scopes

        return self._file.mutate(change)

    def _revoke_grant(self, state: OAuthState, grant_id: str, reason: str) -> None:
        grant = state.grants.get(grant_id)
        if grant is not None and grant.revoked_at is None:
            grant.revoked_at, grant.revoke_reason = self.clock(), reason

    def peek_code(self, code: str) -> AuthCodeRecord | None:
        """The unconsumed record for a code; a consumed one is a replay (its grant is revoked)."""
        if not code.startswith(CODE_PREFIX):
            return None
        digest = sha256_hex(code)
        record = self._file.read().codes.get(digest)
        if record is None:
            return None
        if record.consumed_at is not None:
            self._file.mutate(
                lambda state: self._revoke_grant(state, record.grant_id, "authorization code replayed")
            )
            return None
        grant = self._file.read().grants.get(record.grant_id)
        if grant is None or grant.revoked_at is not None:
            return None
        return record

    def redeem_code(self, code: str, client_id: str) -> IssuedTokens:
        """Consume an authorization code and issue the grant's first access and refresh tokens.

        Raises:
            GrantReplayed: the code was already consumed (concurrently or before): the grant is revoked.
        """
        digest = sha256_hex(code)

        def change(state: OAuthState) -> IssuedTokens | None:
            now = self.clock()
            record = state.codes.get(digest)
            if record is None or record.client_id != client_id:
                return None
            grant = state.grants.get(record.grant_id)
            if record.consumed_at is not None or grant is None or grant.revoked_at is not None:
                self._revoke_grant(state, record.grant_id, "authorization code replayed")
                return None
            if record.expires_at <= now:
                return None
            record.consumed_at = now
            return self._issue(state, grant, record.scopes, now)

        issued = self._file.mutate(change)
        if issued is None:
            raise GrantReplayed("authorization code is invalid, expired or already used")
        return issued

    def _issue(self, state: OAuthState, grant: GrantRecord, scopes: list[str], now: float) -> IssuedTokens:
        access = ACCESS_PREFIX + random_token(32)
        refresh = REFRESH_PREFIX + random_token(32)
        for kind, token, ttl in (
            ("access", access, OAUTH_ACCESS_TTL_SECONDS),
            ("refresh", refresh, OAUTH_REFRESH_TTL_SECONDS),
        ):
            state.tokens[sha256_hex(token)] = TokenRecord(
                kind="access" if kind == "access" else "refresh",
                grant_id=grant.grant_id,
                client_id=grant.client_id,
                scopes=scopes,
                resource=grant.resource,
                expires_at=now + ttl,
            )
        return IssuedTokens(access, refresh, OAUTH_ACCESS_TTL_SECONDS, scopes)

    # -- tokens -----------------------------------------------------------------------------------
    def _live(self, state: OAuthState, record: TokenRecord | None, kind: str) -> bool:
        if record is None or record.kind != kind or record.expires_at <= self.clock():
            return False
        grant = state.grants.get(record.grant_id)
        return grant is not None and grant.revoked_at is None and record.client_id in state.clients

    def verify_access(self, token: str) -> TokenRecord | None:
        """The live record for an access token (unexpired, grant not revoked), else None."""
        if not token.startswith(ACCESS_PREFIX):
            return None
        state = self._file.read()
        record = state.tokens.get(sha256_hex(token))
        return record if self._live(state, record, "access") else None

    def peek_refresh(self, token: str) -> TokenRecord | None:
        """The live record for a refresh token; a rotated one is a replay (its grant is revoked)."""
        if not token.startswith(REFRESH_PREFIX):
            return None
        state = self._file.read()
        record = state.tokens.get(sha256_hex(token))
        if record is not None and record.kind == "refresh" and record.rotated_at is not None:
            grant_id = record.grant_id
            self._file.mutate(lambda s: self._revoke_grant(s, grant_id, "rotated refresh token replayed"))
            return None
        return record if self._live(state, record, "refresh") else None

    def rotate_refresh(self, token: str, client_id: str, scopes: list[str]) -> IssuedTokens:
        """Rotate a refresh token: mark it used, issue a new access and refresh token in the same grant.

        Raises:
            GrantReplayed: it was already rotated (the grant is now revoked) or is no longer valid.
        """
        digest = sha256_hex(token)

        def change(state: OAuthState) -> IssuedTokens | None:
            now = self.clock()
            record = state.tokens.get(digest)
            if record is None or record.kind != "refresh" or record.client_id != client_id:
                return None
            if record.rotated_at is not None:
                self._revoke_grant(state, record.grant_id, "rotated refresh token replayed")
                return None
            if not self._live(state, record, "refresh"):
                return None
            if not set(scopes) <= set(record.scopes):
                return None
            record.rotated_at = now
            grant = state.grants[record.grant_id]
            self._prune(state, now)
            return self._issue(state, grant, sorted(set(scopes)), now)

        issued = self._file.mutate(change)
        if issued is None:
            raise GrantReplayed("refresh token is invalid, expired or already used")
        return issued

    def revoke_token(self, token: str) -> None:
        """Revoke the grant behind an access or refresh token (no error for unknown tokens)."""
        digest = sha256_hex(token)

        def change(state: OAuthState) -> None:
            record = state.tokens.get(digest)
            if record is not None:
                self._revoke_grant(state, record.grant_id, "revoked by client")

        self._file.mutate(change)

    def grant(self, grant_id: str) -> GrantRecord | None:
        """A grant by ID (for tests and status)."""
        return self._file.read().grants.get(grant_id)

    def _prune(self, state: OAuthState, now: float) -> None:
        """Drop expired codes and tokens, and revoked grants with nothing left pointing at them."""
        state.codes = {k: v for k, v in state.codes.items() if v.expires_at > now - OAUTH_CODE_TTL_SECONDS}
        state.tokens = {k: v for k, v in state.tokens.items() if v.expires_at > now}
        referenced = {t.grant_id for t in state.tokens.values()} | {c.grant_id for c in state.codes.values()}
        state.grants = {k: g for k, g in state.grants.items() if k in referenced or g.revoked_at is None}
        horizon = now - 86400
        state.activations = [
            a
            for a in state.activations
            if (a.consumed_at or a.revoked_at or a.expires_at) > horizon or a.consumed_at
        ]

    def summary(self) -> dict[str, int]:
        """Counts for status output."""
        state = self._file.read()
        now = self.clock()
        return {
            "registered_clients": len(state.clients),
            "open_activation_codes": sum(1 for a in state.activations if self.activation_status(a) == "open"),
            "active_grants": sum(1 for g in state.grants.values() if g.revoked_at is None),
            "live_access_tokens": sum(
                1 for t in state.tokens.values() if t.kind == "access" and t.expires_at > now
            ),
        }
