"""The gateway's one error model at the HTTP edge: every error answer of a non-OAuth, non-MCP route.

An error is an `IvoaiError`; its class carries the HTTP status (`common/errors.py`) and the stable
code. One renderer turns it into the one JSON body:

    {"error": "<stable code>", "message": "<one line>"}

plus `"error_description"` (the same text) on the refusals of the bearer gate and the guard, which
OAuth and MCP clients read under that RFC 6750 name, and headers the error asks for
(`WWW-Authenticate` on 401/403, `Retry-After` on 503). A 500 is answered with a fixed message and
the real one is logged: internals (paths, SQL errors) never reach a client. Starlette routing's own
404/405 and any unexpected exception are rendered the same way (`EXCEPTION_HANDLERS`, installed on
the app by `server/app.py`).

Not here, by design: the OAuth endpoints answer RFC 6749's `{error, error_description}` themselves
(`oauth_routes.py`, `oauth_clients.py`), and MCP routes answer JSON-RPC errors (tool errors read
`<code>: <message>`: `tools.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ivoai.common.errors import IvoaiError

log = logging.getLogger("ivoai.gateway")

INTERNAL_MESSAGE = "the server failed to handle this request; the server log has the details"
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


class HttpRefusal(IvoaiError):
    """A refusal at the HTTP edge (bearer gate, guard) with its own status, code and headers."""

    def __init__(
        self, message: str, *, code: str, status: int, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.http_status = status
        self.headers = dict(headers or {})


def invalid_token(message: str, challenge: Mapping[str, str]) -> HttpRefusal:
    """401: no credential, or one the route's verifier does not know (expired, revoked, other family)."""
    return HttpRefusal(message, code="invalid_token", status=401, headers=challenge)


def insufficient_scope(message: str, challenge: Mapping[str, str]) -> HttpRefusal:
    """403: a valid credential without the scope the route or the called tool needs."""
    return HttpRefusal(message, code="insufficient_scope", status=403, headers=challenge)


class HandlerTimeout(IvoaiError):
    """A non-streaming handler ran past its deadline."""

    code = "timeout"
    http_status = 504


def error_body(exc: IvoaiError) -> dict[str, Any]:
    """The JSON body for `exc` (see module doc)."""
    message = INTERNAL_MESSAGE if exc.http_status == 500 else exc.message
    body: dict[str, Any] = {"error": exc.code, "message": message}
    if isinstance(exc, HttpRefusal):
        body["error_description"] = message
    return body


def error_response(exc: IvoaiError) -> JSONResponse:
    """The whole answer for `exc`: status, body, and the headers it asks for."""
    headers = dict(exc.headers) if isinstance(exc, HttpRefusal) else {}
    if exc.retry_after_seconds is not None:
        headers["Retry-After"] = str(exc.retry_after_seconds)
    if exc.http_status == 500:
        log.error("request failed: %s: %s", exc.code, exc.message)
    return JSONResponse(error_body(exc), status_code=exc.http_status, headers=headers)


async def _ivoai_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, IvoaiError)
    return error_response(exc)


async def _http_exception(request: Request, exc: Exception) -> Response:
    """Routing's 404 and 405 (and any other HTTPException) in the same body shape."""
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    return JSONResponse(
        {"error": code, "message": exc.detail}, status_code=exc.status_code, headers=exc.headers
    )


async def _unexpected(request: Request, exc: Exception) -> Response:
    """A bug: 500 with the fixed message; Starlette re-raises it afterwards, so it is logged."""
    return JSONResponse({"error": "internal_error", "message": INTERNAL_MESSAGE}, status_code=500)


EXCEPTION_HANDLERS: dict[Any, Any] = {
    IvoaiError: _ivoai_error,
    HTTPException: _http_exception,
    Exception: _unexpected,
}
