"""The real gateway over a real uvicorn socket on 127.0.0.1, driven by the MCP SDK client."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.shared._httpx_utils import create_mcp_http_client

from ivoai.server.gateway.runner import running
from ivoai.server.gateway.settings import GatewaySettings
from tests.server.gateway.support import data_dir, enroll, make_hub, mcp_session

pytestmark = pytest.mark.anyio


async def test_native_routes_over_a_socket_serve_concurrent_sdk_clients(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    with running(data, GatewaySettings(listen_port=0), hub=make_hub(data)) as srv:
        cred = enroll(srv.app)
        assert srv.url.startswith("http://127.0.0.1:") and not srv.url.endswith(":0")
        results: list[bool] = []

        async def one(i: int) -> None:
            async with (
                create_mcp_http_client(headers={"Authorization": f"Bearer {cred}"}) as http,
                mcp_session(f"{srv.url}/v1/memory/mcp", http) as s,
            ):
                w = await s.call_tool(
                    "memory_write_page", {"path": f"notes/{i}.md", "body": f"note number {i}"}
                )
                q = await s.call_tool("memory_query", {"text": f"note number {i}"})
                results.append(not w.is_error and not q.is_error)

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(one, i)
        assert results == [True] * 8


async def test_discovery_and_ready_over_a_socket(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    with running(data, GatewaySettings(listen_port=0), hub=make_hub(data)) as srv:
        async with httpx2.AsyncClient(base_url=srv.url) as http:
            doc = (await http.get("/.well-known/ivoai")).json()
            ready = (await http.get("/ready")).json()
            evil = await http.get("/health", headers={"Host": "evil.example"})
    assert doc["public_base_url"] == srv.url
    assert ready["status"] == "ready"
    assert evil.status_code == 421
