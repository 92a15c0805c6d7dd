"""Interoperability: the MCP SDK's own OAuth client (discovery, DCR, PKCE, resource, iss) against the
real gateway on a socket; the test plays the browser and the administrator's activation code."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.runtime.runner import running
from tests.server.gateway.support import data_dir, make_hub, mcp_session

pytestmark = pytest.mark.anyio


class MemoryStorage:
    """In-memory token storage for the SDK client."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_sdk_oauth_client_completes_the_flow_and_opens_an_mcp_session(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    with running(data, GatewaySettings(listen_port=0), hub=make_hub(data)) as srv:
        activation = srv.app.oauth.create_activation()
        result: dict[str, AuthorizationCodeResult] = {}

        async def browser(authorization_url: str) -> None:
            async with httpx2.AsyncClient(base_url=srv.url) as b:
                start = await b.get(authorization_url)
                assert start.status_code == 302, start.text
                consent = start.headers["location"]
                request_id = parse_qs(urlsplit(consent).query)["request"][0]
                assert (await b.get(consent)).status_code == 200
                form = {"request": request_id, "action": "approve", "activation_code": activation.code}
                done = await b.post("/oauth/consent", data=form, headers={"Origin": srv.url})
                # The SDK asks for every advertised scope; the default activation code allows three of
                # four, so the page shows the narrower grant and asks once more.
                assert done.status_code == 200 and "not <code>memory:delete</code>" in done.text
                confirm = {"request": request_id, "action": "approve"}
                done = await b.post("/oauth/consent", data=confirm, headers={"Origin": srv.url})
            q = {k: v[0] for k, v in parse_qs(urlsplit(done.headers["location"]).query).items()}
            result["cb"] = AuthorizationCodeResult(code=q["code"], state=q.get("state"), iss=q.get("iss"))

        async def callback() -> AuthorizationCodeResult:
            return result["cb"]

        storage = MemoryStorage()
        provider = OAuthClientProvider(
            server_url=f"{srv.url}/mcp",
            client_metadata=OAuthClientMetadata(
                client_name="sdk-client",
                redirect_uris=[AnyUrl("http://127.0.0.1:53682/callback")],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
            ),
            storage=storage,
            redirect_handler=browser,
            callback_handler=callback,
        )
        async with create_mcp_http_client(auth=provider) as http, mcp_session(f"{srv.url}/mcp", http) as s:
            names = {t.name for t in (await s.list_tools()).tools}
            found = await s.call_tool("context_search", {"query": "anything"})
    assert {"search", "fetch", "memory_query"} <= names
    assert not found.is_error
    assert storage.tokens is not None and storage.tokens.refresh_token
    assert storage.tokens.scope == "context:read memory:read memory:write"
    assert result["cb"].iss == srv.url
