"""Bearer authentication in front of an MCP or API route, with HTTP-level scope checks.

One gate per credential family: native routes verify enrollment credentials, `/mcp` verifies OAuth
access tokens (bound to the canonical `/mcp` resource). A credential of the other family is simply
unknown to the verifier, so it is refused with 401 like any invalid token.

For a JSON-RPC `tools/call`, the gate reads the (already size-bounded) body and answers
`403 insufficient_scope` with the scope the tool needs before the MCP layer runs, so OAuth clients
can step up; the tool boundary checks the scope again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ivoai.server.auth.principal import Principal
from ivoai.server.gateway.tools import PRINCIPAL_KEY, TOOL_SCOPES

Verifier = Callable[[str], Principal | None]


async def send_json(
    send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    """Send a complete JSON response (no-store)."""
    data = json.dumps(body).encode("utf-8")
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        (b"cache-control", b"no-store"),
    ]
    raw.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items())
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


def _bearer(scope: Scope) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            text = value.decode("latin-1")
            if text[:7].lower() == "bearer " and text[7:].strip():
                token: str = text[7:].strip()
                return token
            return None
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
        return {"www-authenticate": "Bearer " + ", ".join(parts)}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        principal = self.verify(token) if token is not None else None
        if principal is None:
            error = "invalid_token" if token is not None else None
            await send_json(
                send,
                401,
                {"error": "invalid_token", "error_description": "a valid bearer credential is required"},
                self._challenge(error),
            )
            return
        if self.any_of_scopes and not principal.scopes & set(self.any_of_scopes):
            needed = " ".join(self.any_of_scopes)
            await send_json(
                send,
                403,
                {
                    "error": "insufficient_scope",
                    "error_description": f"this endpoint requires one of: {needed}",
                },
                self._challenge("insufficient_scope", scope_needed=needed),
            )
            return
        if self.inspect_tool_calls and scope.get("method") == "POST":
            body, more = await _read_body(receive)
            for name in _tool_names(body):
                needed_scope = TOOL_SCOPES.get(name)
                if needed_scope is not None and needed_scope not in principal.scopes:
                    await send_json(
                        send,
                        403,
                        {
                            "error": "insufficient_scope",
                            "error_description": f"{name} requires {needed_scope}",
                        },
                        self._challenge("insufficient_scope", scope_needed=needed_scope),
                    )
                    return
            receive = _replay(body, more, receive)
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


async def _read_body(receive: Receive) -> tuple[bytes, Message | None]:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), None


def _replay(body: bytes, trailing: Message | None, receive: Receive) -> Receive:
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    if trailing is not None:
        pending.append(trailing)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
