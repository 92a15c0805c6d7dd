"""A scripted OAuth 2.1 client (httpx2) for end-to-end and attack tests against the real app."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2

from ivoai.server.app import GatewayApp

REDIRECT = "https://client.example/callback"


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def query_of(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


@dataclass
class Client:
    client_id: str
    client_secret: str | None
    redirect_uri: str


async def register(
    http: httpx2.AsyncClient, redirect_uris: list[str] | None = None, **extra: Any
) -> httpx2.Response:
    body = {"redirect_uris": redirect_uris or [REDIRECT], "client_name": "Test Connector", **extra}
    return await http.post("/register", json=body)


async def registered(http: httpx2.AsyncClient, redirect_uri: str = REDIRECT, **extra: Any) -> Client:
    response = await register(http, [redirect_uri], **extra)
    assert response.status_code == 201, response.text
    body = response.json()
    return Client(body["client_id"], body.get("client_secret"), redirect_uri)


def authorize_params(
    app: GatewayApp, client: Client, challenge: str | None, **overrides: str | None
) -> dict[str, str]:
    params: dict[str, str | None] = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": client.redirect_uri,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "state-123",
        "resource": app.settings.mcp_resource_url,
    }
    params.update(overrides)
    return {k: v for k, v in params.items() if v is not None}


async def approve(
    http: httpx2.AsyncClient, consent_location: str, activation_code: str, *, confirm_narrowed: bool = True
) -> httpx2.Response:
    """Open the consent page and approve with `activation_code`, as a user does.

    When the code allows only part of the request the page asks to confirm the narrower grant;
    with `confirm_narrowed` the second Approve is clicked too (its answer is returned).
    """
    request_id = query_of(consent_location)["request"]
    page = await http.get(consent_location)
    assert page.status_code == 200 and "activation" in page.text.lower()
    origin = {"Origin": consent_location.split("/oauth/")[0]}
    decision = await http.post(
        "/oauth/consent",
        data={"request": request_id, "activation_code": activation_code, "action": "approve"},
        headers=origin,
    )
    if confirm_narrowed and decision.status_code == 200 and "allows only part" in decision.text:
        decision = await http.post(
            "/oauth/consent", data={"request": request_id, "action": "approve"}, headers=origin
        )
    return decision


async def token_request(http: httpx2.AsyncClient, client: Client, **form: str) -> httpx2.Response:
    data = {"client_id": client.client_id, **form}
    if client.client_secret:
        data["client_secret"] = client.client_secret
    return await http.post("/token", data=data)


async def code_for(
    app: GatewayApp,
    http: httpx2.AsyncClient,
    client: Client,
    challenge: str,
    *,
    scopes: str | None = None,
    activation_scopes: list[str] | None = None,
) -> str:
    activation = app.oauth.create_activation(scopes=activation_scopes)
    response = await http.get("/authorize", params=authorize_params(app, client, challenge, scope=scopes))
    assert response.status_code == 302, response.text
    decision = await approve(http, response.headers["location"], activation.code)
    assert decision.status_code == 303, decision.text
    q = query_of(decision.headers["location"])
    assert "code" in q, q
    return q["code"]


async def full_flow(
    app: GatewayApp,
    http: httpx2.AsyncClient,
    *,
    scopes: str | None = None,
    activation_scopes: list[str] | None = None,
    **registration: Any,
) -> tuple[Client, dict[str, Any]]:
    """Register (with `registration` metadata), authorize with PKCE and redeem the code; the tokens."""
    client = await registered(http, **registration)
    verifier, challenge = pkce()
    code = await code_for(app, http, client, challenge, scopes=scopes, activation_scopes=activation_scopes)
    response = await token_request(
        http,
        client,
        grant_type="authorization_code",
        code=code,
        code_verifier=verifier,
        redirect_uri=client.redirect_uri,
        resource=app.settings.mcp_resource_url,
    )
    assert response.status_code == 200, response.text
    return client, response.json()


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def mcp_status(http: httpx2.AsyncClient, token: str, **headers: str) -> int:
    """HTTP status of an MCP initialize on /mcp with `token`."""
    response = await http.post(
        "/mcp", json=INIT, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}", **headers}
    )
    return response.status_code


async def tools_call(
    http: httpx2.AsyncClient, token: str, name: str, arguments: dict[str, Any]
) -> httpx2.Response:
    """A `tools/call` of `name` on /mcp with `token` (the raw HTTP response)."""
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return await http.post("/mcp", json=call, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"})
