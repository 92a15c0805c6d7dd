"""The one uvicorn-in-a-thread helper: serves once started, stops cleanly, reports a failed start."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator

import httpx2
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from ivoai.server.runtime.serving import ServerDidNotStart, ServerThread


def _bound() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


async def _hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


def test_the_server_answers_once_started_and_its_socket_is_closed_on_stop() -> None:
    sock = _bound()
    port = sock.getsockname()[1]
    config = uvicorn.Config(Starlette(routes=[Route("/", _hello)]), log_level="warning", lifespan="off")
    serving = ServerThread.start(config, sock, name="test-serving", timeout=30)
    assert httpx2.get(f"http://127.0.0.1:{port}/", timeout=10).text == "hello"
    serving.stop(10)
    assert not serving.thread.is_alive()
    assert sock.fileno() == -1


def test_an_app_whose_startup_fails_is_reported_and_its_socket_closed() -> None:
    @contextlib.asynccontextmanager
    async def failing(app: Starlette) -> AsyncIterator[None]:
        raise RuntimeError("startup failed")
        yield  # pragma: no cover - never reached

    sock = _bound()
    config = uvicorn.Config(Starlette(lifespan=failing), log_level="critical", lifespan="on")
    with pytest.raises(ServerDidNotStart, match="test-failing did not start"):
        ServerThread.start(config, sock, name="test-failing", timeout=30)
    assert sock.fileno() == -1
