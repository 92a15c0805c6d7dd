"""ivoai's implementation of the MCP SDK's OAuth authorization-server provider Protocol.

The SDK owns the authorize and token handlers; this class supplies storage (`OAuthStore`, hashes
only) and policy, closing the gaps of the SDK defaults:

- registration is bounded and accepts only HTTPS and loopback redirect URIs (`registration.py`,
  used by `gateway/oauth_clients.py`);
- authorization matches redirect URIs exactly, except any port on loopback (RFC 8252 §7.3);
- a requested scope outside the client's registration is narrowed to it, not refused (a client
  registered without `scope` may ask for every advertised scope); unknown scopes are refused;
- PKCE: the `code_challenge` must be an S256 value (43 base64url characters), checked before
  anything is parked or consumed;
- the RFC 8707 `resource` must be the canonical public `/mcp` URL at authorize (here), at the
  token endpoint (`oauth_routes.BoundTokenHandler`) and on every request (`verify_principal`);
- authorization does not issue a code itself: it parks the request in the store (shared by every
  process) and redirects the browser to the consent page, which requires an administrator's
  one-time activation code;
- a replayed authorization code or rotated refresh token revokes its whole grant;
- client secrets are stored hashed and compared in constant time (`HashedSecretAuthenticator`).
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Callable
from typing import Any, TypeVar
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
from mcp.shared.auth import InvalidRedirectUriError, InvalidScopeError, OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl
from starlette.requests import Request

from ivoai.common.errors import IvoaiError, ValidationError
from ivoai.common.httpauth import basic_credentials
from ivoai.common.ids import constant_time_equal, sha256_hex
from ivoai.common.limits import OAUTH_CLIENT_NAME_MAX_CHARS, OAUTH_STATE_PARAM_MAX_CHARS
from ivoai.server.auth.oauth_records import AuthCodeRecord, TokenRecord
from ivoai.server.auth.oauth_store import (
    GrantReplayed,
    IssuedTokens,
    OAuthStore,
    PendingAuthorization,
    registered_scopes,
)
from ivoai.server.auth.principal import Principal
from ivoai.server.auth.redirects import redirect_matches
from ivoai.server.auth.scopes import WEB_DEFAULT_SCOPES, WEB_SCOPES

log = logging.getLogger("ivoai.oauth")
_Record = TypeVar("_Record", AuthCodeRecord, TokenRecord)
_SdkToken = TypeVar("_SdkToken", AccessToken, RefreshToken)

CONSENT_PATH = "/oauth/consent"
S256_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # BASE64URL(SHA-256(verifier)) without padding


def _sdk_token(kind: type[_SdkToken], token: str, record: TokenRecord) -> _SdkToken:
    """A stored token record as the SDK's view of it (the grant is the token's subject)."""
    return kind(
        token=token,
        client_id=record.client_id,
        scopes=record.scopes,
        expires_at=int(record.expires_at),
        resource=record.resource,
        subject=record.grant_id,
    )


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

    def validate_scope(self, requested_scope: str | None) -> list[str] | None:
        """The requested scopes narrowed to the registered ones (RFC 6749 §3.3); None when none asked.

        Raises:
            InvalidScopeError: a scope the server does not offer, or nothing left after narrowing.
        """
        if requested_scope is None:
            return None
        wanted = requested_scope.split()
        unknown = sorted(set(wanted) - set(WEB_SCOPES))
        if unknown or not wanted:
            raise InvalidScopeError(
                f"scope {' '.join(unknown) or '(empty)'} is not offered (offered: {' '.join(WEB_SCOPES)})"
            )
        allowed = set(registered_scopes({"scope": self.scope}))
        narrowed = sorted(set(wanted) & allowed)
        if not narrowed:
            raise InvalidScopeError(f"none of {' '.join(wanted)} is registered for this client")
        return narrowed


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
            try:
                basic = basic_credentials(request.headers.get("authorization"))
            except ValueError:
                raise AuthenticationError("Invalid Basic authentication header") from None
            if basic is None:
                raise AuthenticationError("Missing or invalid Basic authentication in Authorization header")
            basic_id, presented = basic
            if basic_id != client_id:
                raise AuthenticationError("Client ID mismatch in Basic auth")
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


class IvoaiOAuthProvider:
    """`OAuthAuthorizationServerProvider` over `OAuthStore` (see module doc)."""

    def __init__(self, store: OAuthStore, *, issuer: str, resource: str) -> None:
        self.store = store
        self.issuer = issuer
        self.resource = resource
        # Open the database at startup, not in the first /mcp bearer check on the event loop. A
        # failure is not fatal here (native routes do not need it): each OAuth use reports it.
        try:
            store.open()
        except IvoaiError as exc:
            log.warning("OAuth state unavailable: %s: %s", exc.code, exc.message)

    # -- clients ----------------------------------------------------------------------------------
    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if not client_id or len(client_id) > 128:
            return None
        record = await anyio.to_thread.run_sync(self.store.get_client, client_id)
        if record is None:
            return None
        return IvoaiClientInfo.model_validate(
            {**record.metadata, "client_id": record.client_id, "client_secret": record.secret_sha256}
        )

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        """Store a client whose metadata `registration.validate_registration` accepted."""
        metadata = client_info.model_dump(
            mode="json",
            exclude={"client_secret", "client_id", "client_id_issued_at", "client_secret_expires_at"},
            exclude_none=True,
        )
        try:
            await anyio.to_thread.run_sync(
                lambda: self.store.register_client(client_info.client_id, metadata, client_info.client_secret)
            )
        except ValidationError as exc:
            raise RegistrationError("invalid_client_metadata", exc.message) from None

    # -- authorization ----------------------------------------------------------------------------
    def offered_scopes(self, client: OAuthClientInformationFull, requested: list[str] | None) -> list[str]:
        """What the consent page offers: the (already narrowed) request, or without one the default
        Web scopes the client registered for (RFC 6749 §3.3: a pre-defined default)."""
        if requested:
            return sorted(set(requested))
        registered = set(registered_scopes({"scope": client.scope}))
        return sorted(registered & set(WEB_DEFAULT_SCOPES)) or sorted(registered)

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        if params.resource is None:
            raise AuthorizeError("invalid_target", f"resource is required and must be {self.resource}")
        if params.resource.rstrip("/") != self.resource:
            raise AuthorizeError("invalid_target", f"resource must be {self.resource}")
        if not S256_CHALLENGE.match(params.code_challenge):
            raise AuthorizeError(
                "invalid_request", "code_challenge must be an S256 challenge: 43 base64url characters"
            )
        if params.state is not None and len(params.state) > OAUTH_STATE_PARAM_MAX_CHARS:
            raise AuthorizeError(
                "invalid_request",
                f"state: {len(params.state)} characters; the limit is {OAUTH_STATE_PARAM_MAX_CHARS}",
            )
        pending = PendingAuthorization(
            request_id=secrets.token_urlsafe(24),
            client_id=client.client_id,
            client_name=(client.client_name or client.client_id)[:OAUTH_CLIENT_NAME_MAX_CHARS],
            redirect_uri=str(params.redirect_uri),
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            scopes=self.offered_scopes(client, params.scopes),
            state=params.state,
            code_challenge=params.code_challenge,
            resource=self.resource,
            created_at=self.store.clock(),
        )
        await anyio.to_thread.run_sync(self.store.park_pending, pending)
        return f"{self.issuer}{CONSENT_PATH}?{urlencode({'request': pending.request_id})}"

    def redirect_with(self, pending: PendingAuthorization, **params: str | None) -> str:
        """The client's redirect URI with response parameters, `state` and `iss` (RFC 9207)."""
        from mcp.server.auth.provider import construct_redirect_uri

        return construct_redirect_uri(pending.redirect_uri, **params, state=pending.state, iss=self.issuer)

    # -- codes and tokens -------------------------------------------------------------------------
    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        record = await self._peek_owned(self.store.peek_code, authorization_code, client)
        if record is None:
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
    async def _peek_owned(
        peek: Callable[[str], _Record | None], secret: str, client: OAuthClientInformationFull
    ) -> _Record | None:
        """`peek(secret)` off the event loop; None unless the record belongs to `client`."""
        record = await anyio.to_thread.run_sync(peek, secret)
        return record if record is not None and record.client_id == client.client_id else None

    @staticmethod
    async def _issue(redeem: Callable[..., IssuedTokens], *args: Any) -> OAuthToken:
        """Redeem a code or rotate a refresh token off the event loop; a replay is `invalid_grant`."""
        try:
            issued = await anyio.to_thread.run_sync(redeem, *args)
        except GrantReplayed as exc:
            raise TokenError("invalid_grant", exc.message) from None
        return OAuthToken(
            access_token=issued.access_token,
            expires_in=issued.expires_in,
            scope=" ".join(issued.scopes),
            refresh_token=issued.refresh_token,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        return await self._issue(self.store.redeem_code, authorization_code.code, client.client_id)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        record = await self._peek_owned(self.store.peek_refresh, refresh_token, client)
        return None if record is None else _sdk_token(RefreshToken, refresh_token, record)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        return await self._issue(self.store.rotate_refresh, refresh_token.token, client.client_id, scopes)

    async def load_access_token(self, token: str) -> AccessToken | None:
        record = await anyio.to_thread.run_sync(self.store.verify_access, token)
        return None if record is None else _sdk_token(AccessToken, token, record)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        await anyio.to_thread.run_sync(
            lambda: self.store.revoke_token(token.token, client_id=token.client_id)
        )

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
