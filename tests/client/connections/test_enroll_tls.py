"""Enrollment refuses a server whose certificate does not validate against the Web PKI.

The server here is a real uvicorn TLS listener with a freshly generated self-signed certificate (by the
`openssl` CLI); what is under test is the client's TLS validation, which fails at the handshake, before
any ivoai endpoint could answer, so the listener serves a plain discovery-shaped document only.
"""

from __future__ import annotations

import io
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ivoai.client.connections.registry import ConnectionRegistry
from ivoai.common.paths import XdgPaths
from tests.conftest import CliRunner
from tests.tls import self_signed_cert


async def _discovery(request: Request) -> JSONResponse:
    return JSONResponse(
        {"protocol_version": 1, "server_version": "0", "public_base_url": str(request.base_url)}
    )


@pytest.fixture
def self_signed_server(tmp_path: Path) -> Iterator[str]:
    cert, key = self_signed_cert(tmp_path)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    app = Starlette(routes=[Route("/.well-known/ivoai", _discovery)])
    server = uvicorn.Server(
        uvicorn.Config(app, log_config=None, ssl_certfile=str(cert), ssl_keyfile=str(key), lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"https://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_a_self_signed_certificate_is_refused_before_the_code_is_sent(
    self_signed_server: str, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, xdg: XdgPaths
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("one-time-code-value-0123456789\n"))
    result = cli("connect", "server", "add", "tls", "--url", self_signed_server, "--code-stdin")
    assert result.code == 1
    assert "TLS validation failed" in result.err
    assert "one-time-code-value" not in result.err
    assert ConnectionRegistry(xdg).load().servers == []
