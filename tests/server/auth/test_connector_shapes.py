"""Issue 13 item 5: the registration and authorization shapes of ChatGPT and Claude web connectors,
each walked end to end with real HTTP against the real app on a socket: discovery, registration
(with and without `scope`; `none` and `client_secret_post`), /authorize asking for the advertised
scopes or for none, the consent page (which must list exactly what is granted), the token exchange,
an MCP request and a refresh."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest

from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.runtime.runner import RunningServer, running
from tests.server.auth.oauth_client import mcp_status, pkce, query_of
from tests.server.gateway.support import data_dir, make_hub

pytestmark = pytest.mark.anyio

ALL = "context:read memory:delete memory:read memory:write"
DEFAULT = "context:read memory:read memory:write"


@dataclass(frozen=True)
class Shape:
    registration: dict[str, Any]
    ask: str | None  # `scope` at /authorize: "advertised" (scopes_supported), None, or a literal
    activation_scopes: list[str] | None  # None: `web-access create` without --scopes
    granted: str  # what the token response (and the last consent page) must say


def _chatgpt(redirect: str, **extra: Any) -> dict[str, Any]:
    return {
        "client_name": "ChatGPT",
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **extra,
    }


def _claude(**extra: Any) -> dict[str, Any]:
    return {
        "client_name": "Claude",
        "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_post",
        **extra,
    }


SHAPES = {
    # The reported failure: registered without scope, then asks for every advertised scope.
    "chatgpt-no-scope-asks-advertised": Shape(
        _chatgpt("https://chatgpt.com/connector_platform_oauth_redirect"), "advertised", None, DEFAULT
    ),
    "chatgpt-per-connector-callback-asks-nothing": Shape(
        _chatgpt("https://chatgpt.com/connector/oauth/AbC123xyz"), None, None, DEFAULT
    ),
    "chatgpt-registered-scope-full-activation": Shape(
        _chatgpt("https://chatgpt.com/connector_platform_oauth_redirect", scope=ALL),
        "advertised",
        ALL.split(),
        ALL,
    ),
    "claude-no-scope-asks-advertised": Shape(_claude(), "advertised", None, DEFAULT),
    "claude-registered-narrow-scope-asks-advertised": Shape(
        _claude(scope="context:read memory:read"), "advertised", None, "context:read memory:read"
    ),
    "claude-no-scope-asks-nothing-full-activation": Shape(_claude(), None, ALL.split(), DEFAULT),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    data = data_dir(tmp_path_factory.mktemp("shapes"))
    with running(data, GatewaySettings(listen_port=0), hub=make_hub(data)) as srv:
        yield srv


def shown_scopes(page: str) -> str:
    """The scopes a consent page says approval grants."""
    listing = re.search(r"<ul class=scopes>(.*?)</ul>", page, re.S)
    assert listing is not None, page
    return " ".join(sorted(re.findall(r"<li><code>([^<]+)</code>", listing.group(1))))


@pytest.mark.parametrize("name", list(SHAPES))
async def test_web_connector_shapes_walk_the_whole_flow_and_the_consent_page_shows_the_grant(
    server: RunningServer, name: str
) -> None:
    shape = SHAPES[name]
    app = server.app
    activation = app.oauth.create_activation(scopes=shape.activation_scopes)
    async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
        challenge_401 = await http.post("/mcp", json={})
        assert challenge_401.status_code == 401
        prm = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
        asm = (await http.get("/.well-known/oauth-authorization-server")).json()
        registered = await http.post(asm["registration_endpoint"], json=shape.registration)
        assert registered.status_code == 201, registered.text
        client = registered.json()
        verifier, challenge = pkce()
        params = {
            "response_type": "code",
            "client_id": client["client_id"],
            "redirect_uri": shape.registration["redirect_uris"][0],
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "st-" + name,
            "resource": prm["resource"],
        }
        if shape.ask == "advertised":
            params["scope"] = " ".join(prm["scopes_supported"])
        elif shape.ask is not None:
            params["scope"] = shape.ask
        start = await http.get(asm["authorization_endpoint"], params=params)
        assert start.status_code == 302, start.text
        consent = start.headers["location"]
        assert consent.startswith(f"{server.url}/oauth/consent?"), consent  # not an invalid_scope redirect
        page = await http.get(consent)
        request_id = query_of(consent)["request"]
        origin = {"Origin": server.url}
        decision = await http.post(
            "/oauth/consent",
            data={"request": request_id, "activation_code": activation.code, "action": "approve"},
            headers=origin,
        )
        last_page = page.text
        if decision.status_code == 200:  # the code allows less than was shown: confirm the narrower grant
            last_page = decision.text
            assert shown_scopes(last_page) != shown_scopes(page.text)
            decision = await http.post(
                "/oauth/consent", data={"request": request_id, "action": "approve"}, headers=origin
            )
        assert decision.status_code == 303, decision.text
        back = query_of(decision.headers["location"])
        assert decision.headers["location"].startswith(shape.registration["redirect_uris"][0] + "?")
        assert back["state"] == "st-" + name and back["iss"] == asm["issuer"]
        form = {
            "grant_type": "authorization_code",
            "code": back["code"],
            "code_verifier": verifier,
            "redirect_uri": shape.registration["redirect_uris"][0],
            "resource": prm["resource"],
            "client_id": client["client_id"],
        }
        if shape.registration["token_endpoint_auth_method"] == "client_secret_post":
            form["client_secret"] = client["client_secret"]
        else:
            assert "client_secret" not in client
        token = await http.post(asm["token_endpoint"], data=form)
        assert token.status_code == 200, token.text
        tokens = token.json()
        assert tokens["scope"] == shape.granted == shown_scopes(last_page)
        assert await mcp_status(http, tokens["access_token"]) == 200
        refresh = {k: v for k, v in form.items() if k in ("client_id", "client_secret", "resource")}
        rotated = await http.post(
            asm["token_endpoint"],
            data={**refresh, "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]},
        )
        assert rotated.status_code == 200, rotated.text
        assert rotated.json()["scope"] == shape.granted


async def test_a_code_allowing_none_of_the_request_sends_invalid_scope_and_stays_unused(
    server: RunningServer,
) -> None:
    app = server.app
    activation = app.oauth.create_activation(scopes=["memory:delete"])
    async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
        client = (await http.post("/register", json=_claude())).json()
        _, challenge = pkce()
        start = await http.get(
            "/authorize",
            params={
                "response_type": "code",
                "client_id": client["client_id"],
                "redirect_uri": "https://claude.ai/api/mcp/auth_callback",
                "code_challenge": challenge,
                "scope": "context:read",
                "resource": app.settings.mcp_resource_url,
            },
        )
        consent = start.headers["location"]
        decision = await http.post(
            "/oauth/consent",
            data={
                "request": query_of(consent)["request"],
                "activation_code": activation.code,
                "action": "approve",
            },
            headers={"Origin": server.url},
        )
    assert query_of(decision.headers["location"])["error"] == "invalid_scope"
    assert [
        app.oauth.activation_status(a) for a in app.oauth.list_activations() if a.id == activation.id
    ] == ["open"]
