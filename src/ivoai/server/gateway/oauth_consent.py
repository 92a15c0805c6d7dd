"""`GET|POST /oauth/consent`: the page between `/authorize` and the client's redirect URI.

It names the client, the host the browser returns to and exactly the scopes approval grants, and
asks for an administrator's one-time activation code (`ivoai server web-access create`):

- the scopes shown are the pending request's (`IvoaiOAuthProvider.offered_scopes`);
- when the activation code allows all of them, Approve grants exactly those;
- when it allows only some, nothing is consumed yet: the code is bound to the request and the page
  shows the narrower grant, which a second Approve grants (so what is granted is always what the
  page showed when the user approved);
- when it allows none of them, the client gets `invalid_scope` and the code stays unused;
- wrong codes re-show the page with one uniform message, `OAUTH_CONSENT_MAX_ATTEMPTS` per request;
  Deny returns `access_denied`. Every redirect carries `state` and `iss` (RFC 9207).

The page forbids framing (`X-Frame-Options: DENY`, CSP `frame-ancestors 'none'`); the guard refuses
a cross-site POST by its Origin.
"""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ivoai.common.errors import ValidationError
from ivoai.common.limits import OAUTH_CONSENT_MAX_ATTEMPTS
from ivoai.server.auth.oauth_provider import CONSENT_PATH, IvoaiOAuthProvider
from ivoai.server.auth.oauth_store import (
    ActivationRejected,
    ClientLimitReached,
    PendingAuthorization,
    PendingExpired,
)

SCOPE_DESCRIPTIONS = {
    "context:read": "search and read the indexed team documents",
    "memory:read": "read memory pages",
    "memory:write": "create and change memory pages",
    "memory:delete": "delete memory pages",
}
_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'"


class ConsentEndpoint:
    """The consent page and its decisions (see module doc)."""

    def __init__(self, provider: IvoaiOAuthProvider) -> None:
        self.provider = provider
        self.store = provider.store

    async def handle(self, request: Request) -> Response:
        if request.method == "GET":
            pending = await anyio.to_thread.run_sync(
                self.store.pending, request.query_params.get("request", "")
            )
            return _expired() if pending is None else consent_page(pending)
        form = await request.form()
        request_id = str(form.get("request", ""))
        pending = await anyio.to_thread.run_sync(self.store.pending, request_id)
        if pending is None:
            return _expired()
        if form.get("action") == "deny":
            return await self._finish(pending, error="access_denied")
        if pending.activation_id is not None:
            return await self._approve(pending, activation_id=pending.activation_id)
        code = str(form.get("activation_code", "")).strip()
        try:
            activation = await anyio.to_thread.run_sync(self.store.check_activation, code)
        except ActivationRejected as exc:
            return await self._wrong_code(pending, exc.message)
        grant = sorted(set(pending.scopes) & set(activation.scopes))
        if not grant:
            return await self._finish(
                pending,
                error="invalid_scope",
                error_description=f"the activation code allows none of {' '.join(pending.scopes)}",
            )
        if grant != sorted(pending.scopes):
            await anyio.to_thread.run_sync(
                lambda: self.store.narrow_pending(
                    pending.request_id, scopes=grant, activation_id=activation.id
                )
            )
            narrowed = await anyio.to_thread.run_sync(self.store.pending, request_id)
            return _expired() if narrowed is None else consent_page(narrowed, asked=pending.scopes)
        return await self._approve(pending, activation_id=activation.id)

    async def _approve(self, pending: PendingAuthorization, *, activation_id: str) -> Response:
        try:
            code, _ = await anyio.to_thread.run_sync(
                lambda: self.store.approve(
                    activation_id=activation_id,
                    client_id=pending.client_id,
                    requested_scopes=pending.scopes,
                    code_challenge=pending.code_challenge,
                    redirect_uri=pending.redirect_uri,
                    redirect_uri_provided_explicitly=pending.redirect_uri_provided_explicitly,
                    resource=pending.resource,
                    pending_request_id=pending.request_id,
                )
            )
        except PendingExpired:
            return _expired()
        except ActivationRejected as exc:  # revoked or used elsewhere since it was checked
            if pending.activation_id is not None:
                return await self._finish(pending, error="access_denied")
            return await self._wrong_code(pending, exc.message)
        except ValidationError as exc:
            return await self._finish(pending, error="invalid_scope", error_description=exc.message)
        except ClientLimitReached as exc:
            return await self._finish(pending, error="temporarily_unavailable", error_description=exc.message)
        return RedirectResponse(self.provider.redirect_with(pending, code=code), status_code=303)

    async def _wrong_code(self, pending: PendingAuthorization, message: str) -> Response:
        attempts = await anyio.to_thread.run_sync(self.store.pending_attempt_failed, pending.request_id)
        if attempts >= OAUTH_CONSENT_MAX_ATTEMPTS:
            return await self._finish(pending, error="access_denied")
        return consent_page(pending, error=message)

    async def _finish(self, pending: PendingAuthorization, **params: str) -> Response:
        """End the request with an error redirect to the client (the request is used up)."""
        if await anyio.to_thread.run_sync(self.store.take_pending, pending.request_id) is None:
            return _expired()
        return RedirectResponse(self.provider.redirect_with(pending, **params), status_code=303)


def page(title: str, body: str, status: int = 200) -> HTMLResponse:
    """A small self-contained HTML page that cannot be framed."""
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


def _expired() -> HTMLResponse:
    return page("Authorization request expired", "<p>Start again from your AI client.</p>", 400)


def _scope_list(scopes: list[str]) -> str:
    items = "".join(
        f"<li><code>{html.escape(s)}</code>: {html.escape(SCOPE_DESCRIPTIONS.get(s, s))}</li>" for s in scopes
    )
    return f"<ul class=scopes>{items}</ul>"


def consent_page(
    pending: PendingAuthorization, *, error: str | None = None, asked: list[str] | None = None
) -> HTMLResponse:
    """The page for a pending request: exactly `pending.scopes` are granted by Approve."""
    host = urlsplit(pending.redirect_uri).netloc
    name = html.escape(pending.client_name)
    narrowed = pending.activation_id is not None
    parts: list[Any] = [
        f"<p><b>{name}</b> asks to use this ivoai server. Approving grants exactly:</p>",
        _scope_list(pending.scopes),
        f"<p>After approval your browser returns to <code>{html.escape(host)}</code>.</p>",
    ]
    if narrowed:
        left_out = sorted(set(asked or []) - set(pending.scopes))
        parts.insert(
            0,
            "<p>Your activation code allows only part of what was asked for"
            + (f" (not <code>{html.escape(' '.join(left_out))}</code>)" if left_out else "")
            + ". Approve to grant the scopes below, or deny.</p>",
        )
    else:
        parts.append(
            "<p>Enter the activation code your administrator created with "
            "<code>ivoai server web-access create</code>.</p>"
        )
    if error:
        parts.append(f"<p class=err role=alert>{html.escape(error)}</p>")
    code_field = (
        ""
        if narrowed
        else "<p><label>Activation code <input name=activation_code type=password autocomplete=off "
        "required autofocus size=48></label></p>"
    )
    parts.append(
        f'<form method=post action="{CONSENT_PATH}">'
        f'<input type=hidden name=request value="{html.escape(pending.request_id)}">'
        f"{code_field}"
        "<p><button name=action value=approve>Approve</button>"
        "<button name=action value=deny formnovalidate>Deny</button></p></form>"
    )
    return page("Connect to ivoai", "".join(parts), 400 if error else 200)
