"""OAuth 2.1 routes for `/mcp`: the SDK's handlers with ivoai's provider, plus the consent page.

- `GET /.well-known/oauth-authorization-server` (RFC 8414), with
  `authorization_response_iss_parameter_supported`;
- `GET /.well-known/oauth-protected-resource/mcp` (RFC 9728; also at the bare well-known path);
- `GET|POST /authorize` (`IssuingAuthorizationHandler` around the SDK's `AuthorizationHandler`):
  every redirect it issues to the client carries `iss` (RFC 9207), errors included;
- `POST /token` (`BoundTokenHandler` around the SDK's `TokenHandler`: `resource` must be the
  canonical `/mcp` URL when present, and the PKCE S256 verifier is checked in constant time first);
- `POST /register` (`oauth_clients.RegistrationEndpoint`: bounded RFC 7591 registration);
- `POST /revoke` (`oauth_clients.RevocationEndpoint`: RFC 7009 for confidential and public clients,
  revokes the whole grant);
- `GET|POST /oauth/consent` (`oauth_consent.ConsentEndpoint`): shows exactly what approval grants and
  asks for the administrator's activation code.

Each endpoint is a handler class in the SDK's style (dependencies in the constructor, one
`handle(request)`); errors keep RFC 6749's `{error, error_description}` shape, never the `/v1` one.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio.to_thread
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
from mcp.server.auth.handlers.token import TokenErrorResponse, TokenHandler
from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.middleware.client_auth import ClientAuthenticator
from mcp.server.auth.routes import cors_middleware
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ivoai.common.ids import constant_time_equal
from ivoai.server.auth.oauth_provider import CONSENT_PATH, HashedSecretAuthenticator, IvoaiOAuthProvider
from ivoai.server.auth.scopes import WEB_SCOPES
from ivoai.server.gateway.oauth_clients import RegistrationEndpoint, RevocationEndpoint
from ivoai.server.gateway.oauth_consent import ConsentEndpoint

PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource"
CLIENT_AUTH_METHODS = ["client_secret_post", "client_secret_basic", "none"]


def resource_metadata_url(issuer: str) -> str:
    """RFC 9728 §3.1 metadata URL for the `/mcp` resource."""
    return f"{issuer}{PROTECTED_RESOURCE_PATH}/mcp"


def authorization_server_metadata(provider: IvoaiOAuthProvider) -> OAuthMetadata:
    """The RFC 8414 document: endpoints, scopes, code flow with S256 PKCE, RFC 9207 `iss`."""
    issuer = provider.issuer
    return OAuthMetadata.model_validate(
        {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "registration_endpoint": f"{issuer}/register",
            "revocation_endpoint": f"{issuer}/revoke",
            "revocation_endpoint_auth_methods_supported": CLIENT_AUTH_METHODS,
            "scopes_supported": list(WEB_SCOPES),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": CLIENT_AUTH_METHODS,
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
        }
    )


def protected_resource_metadata(provider: IvoaiOAuthProvider) -> ProtectedResourceMetadata:
    """The RFC 9728 document for the `/mcp` resource."""
    return ProtectedResourceMetadata.model_validate(
        {
            "resource": provider.resource,
            "authorization_servers": [provider.issuer],
            "scopes_supported": list(WEB_SCOPES),
            "resource_name": "ivoai",
        }
    )


def _pkce_s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii", "replace")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def _token_error(error: str, description: str) -> Response:
    return PydanticJSONResponse(
        content=TokenErrorResponse(error=error, error_description=description),  # type: ignore[arg-type]
        status_code=400,
        headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
    )


class IssuingAuthorizationHandler:
    """`/authorize`: the SDK's handler; its error redirects to the client get `iss` (RFC 9207)."""

    def __init__(self, provider: IvoaiOAuthProvider) -> None:
        self.issuer = provider.issuer
        self.sdk = AuthorizationHandler(provider)

    async def handle(self, request: Request) -> Response:
        response: Response = await self.sdk.handle(request)
        location = response.headers.get("location")
        if response.status_code == 302 and location and not location.startswith(self.issuer + CONSENT_PATH):
            # An error redirect to the client: RFC 9207 wants `iss` on every authorization response.
            parts = urlsplit(location)
            query = [*parse_qsl(parts.query, keep_blank_values=True), ("iss", self.issuer)]
            return RedirectResponse(urlunsplit(parts._replace(query=urlencode(query))), status_code=302)
        return response


class BoundTokenHandler:
    """`/token`: the SDK's handler after two checks of ours (see module doc)."""

    def __init__(self, provider: IvoaiOAuthProvider, authenticator: ClientAuthenticator) -> None:
        self.provider = provider
        self.sdk = TokenHandler(provider, authenticator)

    async def _pkce_mismatch(self, code: str, verifier: str) -> bool:
        record = await anyio.to_thread.run_sync(self.provider.store.peek_code, code)
        return record is not None and not constant_time_equal(_pkce_s256(verifier), record.code_challenge)

    async def handle(self, request: Request) -> Response:
        form = await request.form()  # cached on the request; the SDK handler reads the same form
        resource = form.get("resource")
        if isinstance(resource, str) and resource.rstrip("/") != self.provider.resource:
            return _token_error("invalid_target", f"resource must be {self.provider.resource}")
        if form.get("grant_type") == "authorization_code":
            code, verifier = form.get("code"), form.get("code_verifier")
            if (
                isinstance(code, str)
                and isinstance(verifier, str)
                and await self._pkce_mismatch(code, verifier)
            ):
                return _token_error("invalid_grant", "incorrect code_verifier")
        response: Response = await self.sdk.handle(request)
        return response


def _cors(path: str, handle: Callable[[Request], Awaitable[Response]], *methods: str) -> Route:
    allowed = [*methods, "OPTIONS"]
    return Route(path, endpoint=cors_middleware(handle, allowed), methods=allowed)


def oauth_routes(provider: IvoaiOAuthProvider) -> list[Route]:
    """Every OAuth route (see module doc)."""
    authenticator = HashedSecretAuthenticator(provider)
    metadata = MetadataHandler(authorization_server_metadata(provider)).handle
    resource = ProtectedResourceMetadataHandler(protected_resource_metadata(provider)).handle
    return [
        _cors("/.well-known/oauth-authorization-server", metadata, "GET"),
        _cors(f"{PROTECTED_RESOURCE_PATH}/mcp", resource, "GET"),
        _cors(PROTECTED_RESOURCE_PATH, resource, "GET"),
        Route("/authorize", endpoint=IssuingAuthorizationHandler(provider).handle, methods=["GET", "POST"]),
        _cors("/token", BoundTokenHandler(provider, authenticator).handle, "POST"),
        _cors("/register", RegistrationEndpoint(provider).handle, "POST"),
        _cors("/revoke", RevocationEndpoint(provider, authenticator).handle, "POST"),
        Route(CONSENT_PATH, endpoint=ConsentEndpoint(provider).handle, methods=["GET", "POST"]),
    ]
