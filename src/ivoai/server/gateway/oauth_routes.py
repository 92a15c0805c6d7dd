"""OAuth 2.1 routes for `/mcp`: the SDK's handlers with ivoai's provider, plus the consent page.

- `GET /.well-known/oauth-authorization-server` (RFC 8414), with
  `authorization_response_iss_parameter_supported`;
- `GET /.well-known/oauth-protected-resource/mcp` (RFC 9728; also at the bare well-known path);
- `GET|POST /authorize` (SDK `AuthorizationHandler`), every redirect it issues to the client
  carries `iss` (RFC 9207), errors included;
- `POST /token` (SDK `TokenHandler` behind `token_endpoint`: `resource` must be the canonical
  `/mcp` URL when present, and the PKCE S256 verifier is checked in constant time first);
- `POST /register` (`oauth_clients.RegistrationEndpoint`: bounded RFC 7591 registration);
- `POST /revoke` (`oauth_clients.RevocationEndpoint`: RFC 7009 for confidential and public clients,
  revokes the whole grant);
- `GET|POST /oauth/consent` (`oauth_consent.ConsentEndpoint`): shows exactly what approval grants and
  asks for the administrator's activation code.
"""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio.to_thread
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
from mcp.server.auth.handlers.token import TokenErrorResponse, TokenHandler
from mcp.server.auth.json_response import PydanticJSONResponse
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


def resource_metadata_url(issuer: str) -> str:
    """RFC 9728 §3.1 metadata URL for the `/mcp` resource."""
    return f"{issuer}{PROTECTED_RESOURCE_PATH}/mcp"


def _pkce_s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii", "replace")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def _token_error(error: str, description: str) -> Response:
    return PydanticJSONResponse(
        content=TokenErrorResponse(error=error, error_description=description),  # type: ignore[arg-type]
        status_code=400,
        headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
    )


def build_oauth_routes(provider: IvoaiOAuthProvider) -> list[Route]:
    """Every OAuth route (see module doc)."""
    issuer = provider.issuer
    metadata = OAuthMetadata.model_validate(
        {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "registration_endpoint": f"{issuer}/register",
            "revocation_endpoint": f"{issuer}/revoke",
            "revocation_endpoint_auth_methods_supported": [
                "client_secret_post",
                "client_secret_basic",
                "none",
            ],
            "scopes_supported": list(WEB_SCOPES),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic", "none"],
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
        }
    )
    resource_meta = ProtectedResourceMetadata.model_validate(
        {
            "resource": provider.resource,
            "authorization_servers": [issuer],
            "scopes_supported": list(WEB_SCOPES),
            "resource_name": "ivoai",
        }
    )
    authenticator = HashedSecretAuthenticator(provider)
    token_handler = TokenHandler(provider, authenticator)
    authorize_handler = AuthorizationHandler(provider)
    register_handler = RegistrationEndpoint(provider)
    revoke_handler = RevocationEndpoint(provider, authenticator)
    consent = ConsentEndpoint(provider).handle

    async def authorize(request: Request) -> Response:
        response = await authorize_handler.handle(request)
        location = response.headers.get("location")
        if response.status_code == 302 and location and not location.startswith(issuer + CONSENT_PATH):
            # An error redirect to the client: RFC 9207 wants `iss` on every authorization response.
            parts = urlsplit(location)
            query = [*parse_qsl(parts.query, keep_blank_values=True), ("iss", issuer)]
            return RedirectResponse(urlunsplit(parts._replace(query=urlencode(query))), status_code=302)
        return response

    async def token(request: Request) -> Response:
        form = await request.form()  # cached on the request; the SDK handler reads the same form
        resource = form.get("resource")
        if isinstance(resource, str) and resource.rstrip("/") != provider.resource:
            return _token_error("invalid_target", f"resource must be {provider.resource}")
        if form.get("grant_type") == "authorization_code":
            code, verifier = form.get("code"), form.get("code_verifier")
            if isinstance(code, str) and isinstance(verifier, str):
                record = await anyio.to_thread.run_sync(provider.store.peek_code, code)
                if record is not None and not constant_time_equal(
                    _pkce_s256(verifier), record.code_challenge
                ):
                    return _token_error("invalid_grant", "incorrect code_verifier")
        response: Response = await token_handler.handle(request)
        return response

    prm = ProtectedResourceMetadataHandler(resource_meta).handle
    return [
        Route(
            "/.well-known/oauth-authorization-server",
            endpoint=cors_middleware(MetadataHandler(metadata).handle, ["GET", "OPTIONS"]),
            methods=["GET", "OPTIONS"],
        ),
        Route(
            f"{PROTECTED_RESOURCE_PATH}/mcp",
            endpoint=cors_middleware(prm, ["GET", "OPTIONS"]),
            methods=["GET", "OPTIONS"],
        ),
        Route(
            PROTECTED_RESOURCE_PATH,
            endpoint=cors_middleware(prm, ["GET", "OPTIONS"]),
            methods=["GET", "OPTIONS"],
        ),
        Route("/authorize", endpoint=authorize, methods=["GET", "POST"]),
        Route("/token", endpoint=cors_middleware(token, ["POST", "OPTIONS"]), methods=["POST", "OPTIONS"]),
        Route(
            "/register",
            endpoint=cors_middleware(register_handler.handle, ["POST", "OPTIONS"]),
            methods=["POST", "OPTIONS"],
        ),
        Route(
            "/revoke",
            endpoint=cors_middleware(revoke_handler.handle, ["POST", "OPTIONS"]),
            methods=["POST", "OPTIONS"],
        ),
        Route(CONSENT_PATH, endpoint=consent, methods=["GET", "POST"]),
    ]
