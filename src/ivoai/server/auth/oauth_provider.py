"""ivoai's implementation of the MCP SDK's OAuth authorization-server provider Protocol.

The SDK owns the HTTP handlers (metadata, authorize, token, register, revoke); this class supplies
storage (`OAuthStore`, hashes only) and policy, closing the gaps of the SDK defaults:

- registration accepts only HTTPS and loopback redirect URIs (`redirects.registration_problem`);
- authorization matches redirect URIs exactly, except any port on loopback (RFC 8252 §7.3);
- the RFC 8707 `resource` must be the canonical public `/mcp` URL at authorize (here), at the
  token endpoint (`oauth_routes.token_endpoint`) and on every request (`verify_principal`);
- authorization does not issue a code itself: it parks the request and redirects the browser to
  the consent page, which requires an administrator's one-time activation code;
- a replayed authorization code or rotated refresh token revokes its whole grant;
- client secrets are stored hashed and compared in constant time (`HashedSecretAuthenticator`).
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import anyio.to_thread
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import InvalidRedirectUriError, OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl
from starlette.requests import Request

from ivoai.common.errors import ValidationError
from ivoai.common.ids import constant_time_equal, sha256_hex
from ivoai.common.limits import OAUTH_PENDING_MAX, OAUTH_PENDING_TTL_SECONDS
from ivoai.server.auth.oauth_store import GrantReplayed, IssuedTokens, OAuthStore
from ivoai.server.auth.principal import Principal
from ivoai.server.auth.redirects import redirect_matches, registration_problem

CONSENT_PATH = "/oauth/consent"


class IvoaiClientInfo(OAuthClientInformationFull):
    """A registered client whose redirect matching follows `redirects.redirect_matches`.

    `client_secret` holds the SHA-256 of the secret (see `HashedSecretAuthenticator`).
    """

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        registered = [str(u) for u in self.redirect_uris or []]
        if redirect_uri is None:
            if len(registered) == 1:
                return AnyUrl(registered[0])
            raise InvalidRedirectUriError("redirect_uri must be specified unless exactly one is registered")
        if not redirect_matches(registered, str(redirect_uri)):
            raise InvalidRedirectUriError("redirect_uri is not registered for this client")
        return redirect_uri


class HashedSecretAuthenticator(ClientAuthenticator):
    """The SDK's client authentication, comparing SHA-256 of the presented secret in constant time."""

    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        form = await request.form()
        client_id = form.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise AuthenticationError("Missing client_id")
        client = await self.provider.get_client(client_id)
        if client is None:
            raise AuthenticationError("Invalid client_id")
        method = client.token_endpoint_auth_method
        presented: str | None = None
        if method == "client_secret_basic":
            import base64
            import binascii
            from urllib.parse import unquote

            header = request.headers.get("authorization", "")
            if not header.startswith("Basic "):
                raise AuthenticationError("Missing or invalid Basic authentication in Authorization header")
            try:
                basic_id, _, presented = base64.b64decode(header[6:]).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError, binascii.Error):
                raise AuthenticationError("Invalid Basic authentication header") from None
            if unquote(basic_id) != client_id:
                raise AuthenticationError("Client ID mismatch in Basic auth")
            presented = unquote(presented)
        elif method == "client_secret_post":
            value = form.get("client_secret")
            presented = value if isinstance(value, str) else None
        elif method != "none":
            raise AuthenticationError(f"Unsupported auth method: {method}")
        if method != "none":
            if not client.client_secret or not presented:
                raise AuthenticationError("Client secret is required")
            if not constant_time_equal(client.client_secret, sha256_hex(presented)):
                raise AuthenticationError("Invalid client_secret")
        return client


@dataclass
class PendingAuthorization:
    """An authorization request waiting for the administrator's activation code on the consent page."""

    request_id: str
    client_id: str
    client_name: str
    redirect_uri: str
    redirect_uri_provided_explicitly: bool
    scopes: list[str] | None
    state: str | None
    code_challenge: str
    resource: str
    created_at: float = field(default_factory=time.monotonic)
    attempts: int = 0


class IvoaiOAuthProvider:
    """`OAuthAuthorizationServerProvider` over `OAuthStore` (see module doc)."""

    def __init__(self, store: OAuthStore, *, issuer: str, resource: str) -> None:
        self.store = store
        self.issuer = issuer
        self.resource = resource
        self._pending: dict[str, PendingAuthorization] = {}
        self._pending_lock = threading.Lock()

    # -- clients ----------------------------------------------------------------------------------
    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        record = await anyio.to_thread.run_sync(self.store.get_client, client_id)
        if record is None:
            return None
        return IvoaiClientInfo.model_validate(
            {**record.metadata, "client_id": record.client_id, "client_secret": record.secret_sha256}
        )

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        uris = [str(u) for u in client_info.redirect_uris or []]
        problem = registration_problem(uris)
        if problem is not None:
            raise RegistrationError("invalid_redirect_uri", problem)
        metadata = client_info.model_dump(
            mode="json", exclude={"client_secret", "client_id"}, exclude_none=True
        )
        try:
            await anyio.to_thread.run_sync(
                lambda: self.store.register_client(client_info.client_id, metadata, client_info.client_secret)
            )
        except ValidationError as exc:
            raise RegistrationError("invalid_client_metadata", exc.message) from None

    # -- authorization ----------------------------------------------------------------------------
    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        if params.resource is None:
            raise AuthorizeError("invalid_target", f"resource is required and must be {self.resource}")
        if params.resource.rstrip("/") != self.resource:
            raise AuthorizeError("invalid_target", f"resource must be {self.resource}")
        pending = PendingAuthorization(
            request_id=secrets.token_urlsafe(24),
            client_id=client.client_id,
            client_name=(client.client_name or client.client_id)[:200],
            redirect_uri=str(params.redirect_uri),
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            scopes=params.scopes,
            state=params.state,
            code_challenge=params.code_challenge,
            resource=self.resource,
        )
        with self._pending_lock:
            self._expire_pending()
            if len(self._pending) >= OAUTH_PENDING_MAX:
                raise AuthorizeError("temporarily_unavailable", "too many pending authorization requests")
            self._pending[pending.request_id] = pending
        return f"{self.issuer}{CONSENT_PATH}?{urlencode({'request': pending.request_id})}"

    def _expire_pending(self) -> None:
        horizon = time.monotonic() - OAUTH_PENDING_TTL_SECONDS
        for key in [k for k, p in self._pending.items() if p.created_at < horizon]:
            del self._pending[key]

    def pending(self, request_id: str) -> PendingAuthorization | None:
        """A live pending request by ID."""
        with self._pending_lock:
            self._expire_pending()
            return self._pending.get(request_id)

    def drop_pending(self, request_id: str) -> PendingAuthorization | None:
        """Remove and return a pending request (a decision uses it up)."""
        with self._pending_lock:
            return self._pending.pop(request_id, None)

    def redirect_with(self, pending: PendingAuthorization, **params: str | None) -> str:
        """The client's redirect URI with response parameters, `state` and `iss` (RFC 9207)."""
        from mcp.server.auth.provider import construct_redirect_uri

        return construct_redirect_uri(pending.redirect_uri, **params, state=pending.state, iss=self.issuer)

    # -- codes and tokens -------------------------------------------------------------------------
    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        record = await anyio.to_thread.run_sync(self.store.peek_code, authorization_code)
        if record is None or record.client_id != client.client_id:
            return None
        return AuthorizationCode(
            code=authorization_code,
            scopes=record.scopes,
            expires_at=record.expires_at,
            client_id=record.client_id,
            code_challenge=record.code_challenge,
            redirect_uri=AnyUrl(record.redirect_uri),
            redirect_uri_provided_explicitly=record.redirect_uri_provided_explicitly,
            resource=record.resource,
            subject=record.grant_id,
        )

    @staticmethod
    def _token(issued: IssuedTokens) -> OAuthToken:
        return OAuthToken(
            access_token=issued.access_token,
            expires_in=issued.expires_in,
            scope=" ".join(issued.scopes),
            refresh_token=issued.refresh_token,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        try:
            issued = await anyio.to_thread.run_sync(
                self.store.redeem_code, authorization_code.code, client.client_id
            )
        except GrantReplayed as exc:
            raise TokenError("invalid_grant", exc.message) from None
        return self._token(issued)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        record = await anyio.to_thread.run_sync(self.store.peek_refresh, refresh_token)
        if record is None or record.client_id != client.client_id:
            return None
        return RefreshToken(
            token=refresh_token,
            client_id=record.client_id,
            scopes=record.scopes,
            expires_at=int(record.expires_at),
            resource=record.resource,
            subject=record.grant_id,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        try:
            issued = await anyio.to_thread.run_sync(
                self.store.rotate_refresh, refresh_token.token, client.client_id, scopes
            )
        except GrantReplayed as exc:
            raise TokenError("invalid_grant", exc.message) from None
        return self._token(issued)

    async def load_access_token(self, token: str) -> AccessToken | None:
        record = await anyio.to_thread.run_sync(self.store.verify_access, token)
        if record is None:
            return None
        return AccessToken(
            token=token,
            client_id=record.client_id,
            scopes=record.scopes,
            expires_at=int(record.expires_at),
            resource=record.resource,
            subject=record.grant_id,
        )

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        await anyio.to_thread.run_sync(self.store.revoke_token, token.token)

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: Any
    ) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "the JWT bearer grant is not supported")

    # -- resource server ----------------------------------------------------------------------------
    def verify_principal(self, token: str) -> Principal | None:
        """The principal for an access token bound to this server's `/mcp` resource (every request)."""
        record = self.store.verify_access(token)
        if record is None or record.resource != self.resource:
            return None
        return Principal(
            kind="oauth", client_id=record.client_id, scopes=frozenset(record.scopes), subject=record.grant_id
        )
