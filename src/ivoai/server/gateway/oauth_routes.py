"""OAuth 2.1 routes for `/mcp`: the SDK's handlers with ivoai's provider, plus the consent page.

- `GET /.well-known/oauth-authorization-server` (RFC 8414), with
  `authorization_response_iss_parameter_supported`;
- `GET /.well-known/oauth-protected-resource/mcp` (RFC 9728; also at the bare well-known path);
- `GET|POST /authorize` (SDK `AuthorizationHandler`), every redirect it issues to the client
  carries `iss` (RFC 9207), errors included;
- `POST /token` (SDK `TokenHandler` behind `token_endpoint`: `resource` must be the canonical
  `/mcp` URL when present, and the PKCE S256 verifier is checked in constant time first);
- `POST /register` (SDK `RegistrationHandler`, redirect policy in the provider);
- `POST /revoke` (SDK `RevocationHandler`: revokes the whole grant);
- `GET|POST /oauth/consent`: shows the request and asks for the administrator's activation code.
"""

from __future__ import annotations

import base64
import hashlib
import html
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio.to_thread
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenErrorResponse, TokenHandler
from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.routes import cors_middleware
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ivoai.common.errors import ValidationError
from ivoai.common.ids import constant_time_equal
from ivoai.common.limits import OAUTH_CONSENT_MAX_ATTEMPTS
from ivoai.server.auth.oauth_provider import CONSENT_PATH, HashedSecretAuthenticator, IvoaiOAuthProvider
from ivoai.server.auth.oauth_store import ActivationRejected
from ivoai.server.auth.scopes import WEB_DEFAULT_SCOPES, WEB_SCOPES

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
    register_handler = RegistrationHandler(
        provider,
        options=ClientRegistrationOptions(
            enabled=True, valid_scopes=list(WEB_SCOPES), default_scopes=list(WEB_DEFAULT_SCOPES)
        ),
    )
    revoke_handler = RevocationHandler(provider, authenticator)

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

    async def consent(request: Request) -> Response:
        if request.method == "GET":
            pending = provider.pending(request.query_params.get("request", ""))
            if pending is None:
                return _page("Authorization request expired", "<p>Start again from your AI client.</p>", 400)
            return _consent_page(
                pending.request_id, pending.client_name, pending.redirect_uri, pending.scopes
            )
        form = await request.form()
        request_id = str(form.get("request", ""))
        pending = provider.pending(request_id)
        if pending is None:
            return _page("Authorization request expired", "<p>Start again from your AI client.</p>", 400)
        if form.get("action") == "deny":
            provider.drop_pending(request_id)
            return RedirectResponse(provider.redirect_with(pending, error="access_denied"), status_code=303)
        activation = str(form.get("activation_code", "")).strip()
        try:
            code, _scopes = await anyio.to_thread.run_sync(
                lambda: provider.store.approve(
                    activation_code=activation,
                    client_id=pending.client_id,
                    requested_scopes=pending.scopes,
                    code_challenge=pending.code_challenge,
                    redirect_uri=pending.redirect_uri,
                    redirect_uri_provided_explicitly=pending.redirect_uri_provided_explicitly,
                    resource=pending.resource,
                )
            )
        except ActivationRejected as exc:
            pending.attempts += 1
            if pending.attempts >= OAUTH_CONSENT_MAX_ATTEMPTS:
                provider.drop_pending(request_id)
                return RedirectResponse(
                    provider.redirect_with(pending, error="access_denied"), status_code=303
                )
            return _consent_page(
                pending.request_id,
                pending.client_name,
                pending.redirect_uri,
                pending.scopes,
                error=exc.message,
            )
        except ValidationError as exc:
            provider.drop_pending(request_id)
            return RedirectResponse(
                provider.redirect_with(pending, error="invalid_scope", error_description=exc.message),
                status_code=303,
            )
        provider.drop_pending(request_id)
        return RedirectResponse(provider.redirect_with(pending, code=code), status_code=303)

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


_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'"


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    doc = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title>"
        "<style>body{font:16px system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem}"
        "code{background:#eee;padding:0 .2rem}.err{color:#a00}"
        "button{font-size:1rem;margin-right:.5rem}</style>"
        f"</head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    headers = {"Content-Security-Policy": _CSP, "X-Frame-Options": "DENY"}
    return HTMLResponse(doc, status_code=status, headers=headers)


def _consent_page(
    request_id: str,
    client_name: str,
    redirect_uri: str,
    scopes: list[str] | None,
    *,
    error: str | None = None,
) -> HTMLResponse:
    host = urlsplit(redirect_uri).netloc
    wanted = " ".join(scopes) if scopes else "the client's registered scopes"
    parts: list[Any] = [
        f"<p><b>{html.escape(client_name)}</b> asks to use this ivoai server "
        f"(<code>{html.escape(wanted)}</code>).</p>",
        f"<p>After approval your browser returns to <code>{html.escape(host)}</code>.</p>",
        "<p>Enter the activation code your administrator created with "
        "<code>ivoai server web-access create</code>.</p>",
    ]
    if error:
        parts.append(f"<p class=err role=alert>{html.escape(error)}</p>")
    parts.append(
        f'<form method=post action="{CONSENT_PATH}">'
        f'<input type=hidden name=request value="{html.escape(request_id)}">'
        "<p><label>Activation code <input name=activation_code type=password autocomplete=off required "
        "autofocus size=48></label></p>"
        "<p><button name=action value=approve>Approve</button>"
        "<button name=action value=deny formnovalidate>Deny</button></p></form>"
    )
    return _page("Connect to ivoai", "".join(parts), 400 if error else 200)
