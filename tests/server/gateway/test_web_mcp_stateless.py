"""Web MCP (`/mcp`) served by several workers: stateless, so a client's requests may reach any worker.

Two gateways on one data directory stand for two workers of `server start --workers 2` (the way a
worker builds its app: `create_app(..., web_mcp_stateless=True)`), each on its own real socket. The
MCP SDK client talks to one public origin; a transport in front sends each request to the next
gateway in turn on a new connection, as the kernel may when it spreads connections over workers.
The real multi-process start is covered in `tests/server/runtime/test_workers.py`.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from ivoai.server.app import GatewayApp, create_app
from ivoai.server.datadir import ServerDataDir
from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.runtime.runner import RunningServer, start_background
from tests.server.auth.oauth_client import full_flow
from tests.server.gateway.support import data_dir, make_hub, mcp_session

PUBLIC = "http://127.0.0.1:7744"  # the one origin the client knows; no socket listens on it


class Alternating(httpx2.AsyncBaseTransport):
    """Sends each request to the next port of `ports` in turn on a new connection, keeping the
    URL's Host header (a connection-spreading balancer in front of several workers)."""

    def __init__(self, ports: list[int]) -> None:
        self._next = itertools.cycle(ports)
        self.served: Counter[int] = Counter()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = next(self._next)
        self.served[port] += 1
        request.url = request.url.copy_with(port=port)
        inner = httpx2.AsyncHTTPTransport()  # no pooled connection: a fresh one each time
        response = await inner.handle_async_request(request)
        await response.aread()
        await inner.aclose()
        return response


@contextlib.contextmanager
def two_workers(data: ServerDataDir, *, stateless: bool) -> Iterator[list[RunningServer]]:
    settings = GatewaySettings(listen_port=0, public_url=PUBLIC)

    def build(d: ServerDataDir, s: GatewaySettings) -> GatewayApp:
        return create_app(d, s, hub=make_hub(d), web_mcp_stateless=stateless)

    servers = [start_background(data, settings, build=build) for _ in range(2)]
    try:
        yield servers
    finally:
        for srv in servers:
            srv.stop()


@contextlib.asynccontextmanager
async def web_client(servers: list[RunningServer]) -> AsyncIterator[tuple[httpx2.AsyncClient, Alternating]]:
    transport = Alternating([srv.server.servers[0].sockets[0].getsockname()[1] for srv in servers])
    async with httpx2.AsyncClient(transport=transport, base_url=PUBLIC, timeout=30) as http:
        yield http, transport


async def _session_calls(servers: list[RunningServer]) -> tuple[list[str], Counter[int]]:
    async with web_client(servers) as (http, transport):
        _, tokens = await full_flow(servers[0].app, http)  # OAuth state is shared through the data dir
        http.headers["Authorization"] = f"Bearer {tokens['access_token']}"
        async with mcp_session(f"{PUBLIC}/mcp", http) as session:
            tools = await session.list_tools()
            written = await session.call_tool(
                "memory_write_page", {"workspace": "team", "project": "p", "path": "a.md", "body": "x"}
            )
            status = await session.call_tool("memory_status", {})
            again = await session.list_tools()
    assert not written.is_error and not status.is_error, (written, status)
    assert status.structured_content is not None and status.structured_content["pages"] == 1
    assert [t.name for t in tools.tools] == [t.name for t in again.tools]
    return [t.name for t in tools.tools], transport.served


@pytest.mark.anyio
async def test_a_stateless_web_mcp_session_works_whichever_worker_takes_each_request(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    with two_workers(data, stateless=True) as servers:
        names, served = await _session_calls(servers)
    assert "memory_status" in names and "search" in names
    assert len(served) == 2 and min(served.values()) >= 4, served  # both workers took MCP requests


@pytest.mark.anyio
async def test_a_stateful_web_mcp_session_breaks_when_requests_reach_another_worker(tmp_path: Path) -> None:
    """The control: what N > 1 workers would do to Web MCP clients without the stateless mode."""
    data = data_dir(tmp_path)
    with two_workers(data, stateless=False) as servers, pytest.raises(ExceptionGroup) as caught:
        with anyio.fail_after(60):
            await _session_calls(servers)
    assert caught.group_contains(MCPError, match="Session not found")
