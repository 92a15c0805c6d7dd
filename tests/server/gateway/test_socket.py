"""The real gateway over a real uvicorn socket on 127.0.0.1, driven by the MCP SDK client."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.shared._httpx_utils import create_mcp_http_client

from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.runtime.runner import running, start_background
from tests.server.gateway.support import data_dir, enroll, make_hub, mcp_session
from tests.tls import self_signed_cert

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


def test_a_request_head_that_never_completes_is_cut_off(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    srv = start_background(data, GatewaySettings(listen_port=0), hub=make_hub(data), header_timeout=0.5)
    try:
        port = int(srv.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
            slow.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finishes the head
            assert slow.recv(1024) == b""  # closed by the server (bounded by the 10 s socket timeout)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as fine:
            fine.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            assert fine.recv(1024).startswith(b"HTTP/1.1 200")
    finally:
        srv.stop()


def test_server_log_records_are_redacted() -> None:
    import logging

    from ivoai.server.runtime.runner import RedactingFilter

    record = logging.LogRecord(
        "ivoai",
        logging.WARNING,
        __file__,
        1,
        "header was %s",
        ("Authorization: Bearer abcdefgh12345678",),
        None,
    )
    assert RedactingFilter().filter(record)
    assert "abcdefgh12345678" not in record.getMessage()


async def test_direct_tls_serves_https_with_the_configured_certificate(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    data = data_dir(tmp_path)
    settings = GatewaySettings(listen_port=0, tls_cert=cert, tls_key=key)
    with running(data, settings, hub=make_hub(data)) as srv:
        assert srv.url.startswith("https://127.0.0.1:")
        context = ssl.create_default_context(cafile=str(cert))
        async with httpx2.AsyncClient(base_url=srv.url, verify=context) as http:
            doc = (await http.get("/.well-known/ivoai")).json()
    assert doc["public_base_url"] == srv.url
