"""The one bearer gate in front of every authenticated route, with HTTP-level scope checks.

`BearerGate` wraps any ASGI app (an MCP endpoint, or a plain handler through `authenticated`) and
takes the credential check as a function, so each credential family brings its own: native routes
verify enrollment credentials, `/mcp` verifies OAuth access tokens (bound to the canonical `/mcp`
resource). A credential of another family is simply unknown to the verifier, so it is refused with
401 like any invalid token. The `Authorization` header is read by `common.httpauth`, the one parser.

Refusals are raised as `errors.HttpRefusal`s, `invalid_token` (401) and `insufficient_scope` (403), with their
`WWW-Authenticate` challenge (RFC 6750 §3, plus RFC 9728's `resource_metadata` on `/mcp`); the app's
one exception handler renders them (`errors.py`).

For a JSON-RPC `tools/call`, the gate reads the (already size-bounded) body and answers
`403 insufficient_scope` with the scope the tool needs before the MCP layer runs, so OAuth clients
can step up; the tool boundary checks the scope again.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import request_response
from starlette.types import ASGIApp, Receive, Scope, Send

from ivoai.common.httpauth import bearer_token
from ivoai.server.auth.principal import Principal
from ivoai.server.gateway.bodies import read_body
from ivoai.server.gateway.errors import insufficient_scope, invalid_token
from ivoai.server.gateway.tools import PRINCIPAL_KEY, TOOL_SCOPES

Verifier = Callable[[str], Principal | None]


def _authorization(scope: Scope) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            found: bytes = value
            return found
    return None


def _tool_names(body: bytes) -> list[str]:
    """Tool names of every `tools/call` in a JSON-RPC message or batch (unparseable: none)."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nesting too deep
        return []
    messages = doc if isinstance(doc, list) else [doc]
    names: list[str] = []
    for message in messages:
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message.get("params")
            if isinstance(params, dict) and isinstance(params.get("name"), str):
                names.append(params["name"])
    return names


def principal_of(request: Request) -> Principal:
    """The principal the gate attached to this request (only call behind a gate)."""
    principal = request.scope.get(PRINCIPAL_KEY)
    assert isinstance(principal, Principal), "principal_of() called on a route without a BearerGate"
    return principal


class BearerGate:
    """ASGI wrapper: authenticate, check the route's scopes and each called tool's scope, then pass on."""

    def __init__(
        self,
        app: ASGIApp,
        verify: Verifier,
        *,
        any_of_scopes: tuple[str, ...],
        resource_metadata_url: str | None = None,
        inspect_tool_calls: bool = True,
    ) -> None:
        self.app = app
        self.verify = verify
        self.any_of_scopes = any_of_scopes
        self.resource_metadata_url = resource_metadata_url
        self.inspect_tool_calls = inspect_tool_calls

    def _challenge(self, error: str | None, *, scope_needed: str | None = None) -> dict[str, str]:
        parts = ['realm="ivoai"']
        if error:
            parts.append(f'error="{error}"')
        if scope_needed:
            parts.append(f'scope="{scope_needed}"')
        if self.resource_metadata_url:
            parts.append(f'resource_metadata="{self.resource_metadata_url}"')
        return {"WWW-Authenticate": "Bearer " + ", ".join(parts)}

    def authenticate(self, scope: Scope) -> Principal:
        """The caller holding one of the route's scopes.

        Raises:
            HttpRefusal: 401 `invalid_token` (no credential, or one the verifier does not accept) or
                403 `insufficient_scope` (a valid credential without any of the route's scopes).
        """
        token = bearer_token(_authorization(scope))
        principal = self.verify(token) if token is not None else None
        if principal is None:
            error = "invalid_token" if token is not None else None
            raise invalid_token("a valid bearer credential is required", self._challenge(error))
        if self.any_of_scopes and not principal.scopes & set(self.any_of_scopes):
            needed = " ".join(self.any_of_scopes)
            raise insufficient_scope(
                f"this endpoint requires one of: {needed}",
                self._challenge("insufficient_scope", scope_needed=needed),
            )
        return principal

    def _check_tools(self, principal: Principal, body: bytes) -> None:
        for name in _tool_names(body):
            needed = TOOL_SCOPES.get(name)
            if needed is not None and needed not in principal.scopes:
                raise insufficient_scope(
                    f"{name} requires {needed}", self._challenge("insufficient_scope", scope_needed=needed)
                )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        principal = self.authenticate(scope)
        if self.inspect_tool_calls and scope.get("method") == "POST":
            body = await read_body(receive)  # already bounded (and buffered) by the guard
            self._check_tools(principal, body.data)
            receive = body.replay(receive)
        scope = dict(scope)
        scope[PRINCIPAL_KEY] = principal
        # The SDK binds a stateful MCP session to the credential that opened it (client + grant).
        scope["user"] = AuthenticatedUser(
            AccessToken(
                token="-",
                client_id=principal.client_id,
                scopes=sorted(principal.scopes),
                subject=principal.subject,
            )
        )
        await self.app(scope, receive, send)


def authenticated(
    endpoint: Callable[[Request], Awaitable[Response]], verify: Verifier, *any_of_scopes: str
) -> BearerGate:
    """A plain request handler behind the gate (the handler reads its caller with `principal_of`)."""
    return BearerGate(
        request_response(endpoint), verify, any_of_scopes=any_of_scopes, inspect_tool_calls=False
    )
