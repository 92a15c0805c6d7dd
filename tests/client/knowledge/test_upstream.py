"""The router's upstream MCP session against REAL MCP SDK servers over a loopback socket.

The servers here are the SDK's own `MCPServer` served by uvicorn, in the two Streamable HTTP modes a
source can use: stateful with SSE answers and an `Mcp-Session-Id`, and stateless with plain JSON
answers (the mode ivoai's context and memory services use). The router's lean session must see
exactly what the SDK client sees, and keep the failure semantics the router relies on.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult

from ivoai.client.knowledge.profiles import ServerProfile, build_sources
from ivoai.client.knowledge.router import start_router
from ivoai.client.knowledge.upstream import UpstreamCallError, UpstreamConnection, open_session

pytestmark = pytest.mark.timeout(60)


def _app(*, stateless: bool) -> Any:
    server: MCPServer[Any] = MCPServer("upstream-under-test", log_level="WARNING")
    writes: list[str] = []

    @server.tool()
    def echo(text: str) -> dict[str, Any]:
        """Echo the text as one structured result."""
        return {"results": [{"text": text, "score": 0.5}], "note": "ünïcode ✓"}

    @server.tool()
    def write(text: str) -> str:
        """Record a write."""
        writes.append(text)
        return f"written {len(writes)}"

    @server.tool()
    def broken() -> str:
        """Always fails as a tool."""
        raise ToolError("not_found: nothing here")

    return server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=stateless,
        json_response=stateless,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


@dataclass
class _Served:
    url: str
    port: int
    stateless: bool
    server: uvicorn.Server | None = None
    thread: threading.Thread | None = None

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(16)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        ready = threading.Event()

        class _Server(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets=sockets)
                ready.set()

        app = _app(stateless=self.stateless)
        server = _Server(uvicorn.Config(app, log_config=None, log_level="warning", lifespan="on"))
        self.server = server
        self.thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        assert ready.wait(20) and server.started, "the test MCP server did not start"

    def stop(self) -> None:
        assert self.server is not None and self.thread is not None
        self.server.should_exit = True
        self.thread.join(20)


@pytest.fixture(params=["stateful-sse", "stateless-json"])
def upstream(request: pytest.FixtureRequest) -> Iterator[_Served]:
    served = _Served("", 0, stateless=request.param == "stateless-json")
    served.start()
    try:
        yield served
    finally:
        served.stop()


def _sdk_view(url: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with open_session(url, "credential") as session:
            result = await session.call_tool(name, args)
            return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    return anyio.run(main)


def _as_model(result: dict[str, Any]) -> dict[str, Any]:
    return CallToolResult.model_validate(result, by_alias=True).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )


def test_the_lean_session_returns_what_the_sdk_client_sees(upstream: _Served) -> None:
    async def main() -> list[dict[str, Any]]:
        conn = UpstreamConnection(upstream.url, "credential")
        try:
            return [
                await conn.call_tool("echo", {"text": "quokka"}, 10),
                await conn.call_tool("broken", {}, 10),
            ]
        finally:
            await conn.aclose()

    echo, broken = anyio.run(main)
    assert echo["structuredContent"]["note"] == "ünïcode ✓"
    assert broken["isError"] is True and "not_found: nothing here" in broken["content"][0]["text"]
    # The same result once read as the model the router answers with (which adds model defaults).
    assert _as_model(echo) == _sdk_view(upstream.url, "echo", {"text": "quokka"})
    assert _as_model(broken) == _sdk_view(upstream.url, "broken", {})


def test_invalid_arguments_are_an_answer_and_keep_the_session(upstream: _Served) -> None:
    async def main() -> tuple[UpstreamCallError | None, bool]:
        conn = UpstreamConnection(upstream.url, "credential")
        try:
            await conn.call_tool("echo", {"text": "a"}, 10)
            try:
                await conn.call_tool("no_such_tool", {}, 10)
            except UpstreamCallError as exc:
                return exc, conn.connected
            return None, conn.connected
        finally:
            await conn.aclose()

    error, still_connected = anyio.run(main)
    # An unknown tool is either a JSON-RPC refusal (answered) or a tool-level error result, per SDK version.
    if error is not None:
        assert error.answered and error.sent
    assert still_connected


def test_a_restarted_server_is_reached_on_a_fresh_session_for_reads_but_a_write_is_not_retried(
    upstream: _Served,
) -> None:
    async def restart() -> None:
        await anyio.to_thread.run_sync(upstream.stop)
        await anyio.to_thread.run_sync(upstream.start)  # same port: sessions and kept-alive connections gone

    async def main() -> None:
        conn = UpstreamConnection(upstream.url, "credential")
        try:
            read = await conn.call_tool("echo", {"text": "again"}, 10, idempotent=True)
            assert read["structuredContent"]["results"][0]["text"] == "again"
            await restart()
            read = await conn.call_tool("echo", {"text": "again"}, 10, idempotent=True)
            assert read["structuredContent"]["results"][0]["text"] == "again"
            assert conn.connected
            await restart()
            if upstream.stateless:
                # Nothing was lost but a kept-alive connection, which httpx2 re-opens below the session.
                written = await conn.call_tool("write", {"text": "once"}, 10)
                assert "written" in written["content"][0]["text"]
            else:
                with pytest.raises(UpstreamCallError) as info:
                    await conn.call_tool("write", {"text": "once"}, 10)
                assert info.value.sent and not info.value.answered
                assert not conn.connected  # the next call opens a fresh session
        finally:
            await conn.aclose()

    anyio.run(main)


def test_a_dead_upstream_is_a_connect_failure_that_was_never_sent() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def main() -> None:
        conn = UpstreamConnection(f"http://127.0.0.1:{port}/mcp", "credential")
        try:
            await conn.call_tool("echo", {"text": "a"}, 5)
        finally:
            await conn.aclose()

    with pytest.raises(UpstreamCallError) as info:
        anyio.run(main)
    assert info.value.sent is False and "could not connect" in str(info.value)


# ---- an upstream that breaks the protocol -------------------------------------------------------


def _nonconformant_app(tool_result: dict[str, Any]) -> Any:
    """An MCP endpoint that completes the handshake but answers tools/call with `tool_result`.

    Stands in for a broken or hostile source: no SDK server can be made to send such a result.
    """
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def mcp(request: Request) -> Response:
        message = await request.json()
        if "id" not in message:
            return Response(status_code=202)
        if message["method"] == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "broken", "version": "0"},
            }
        else:
            result = tool_result
        return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "result": result})

    async def moved(request: Request) -> Response:
        return Response(status_code=307, headers={"location": "/v1/mcp/context"})

    async def elsewhere(request: Request) -> Response:
        return Response(status_code=307, headers={"location": "http://localhost:1/v1/mcp/context"})

    return Starlette(
        routes=[
            Route("/v1/mcp/context", mcp, methods=["POST"]),
            Route("/moved", moved, methods=["POST", "DELETE"]),
            Route("/elsewhere", elsewhere, methods=["POST", "DELETE"]),
        ]
    )


@contextlib.contextmanager
def _serve(app: Any) -> Iterator[int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    ready = threading.Event()

    class _Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            ready.set()

    server = _Server(uvicorn.Config(app, log_config=None, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        assert ready.wait(20)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(20)


def _router_answer(port: int, *more_ports: int) -> dict[str, Any]:
    eps = {"context_mcp": "/v1/mcp/context", "memory_mcp": "/v1/memory/mcp"}
    profiles = [
        ServerProfile(
            id=f"srv_{i:032x}",
            alias=f"s{i}",
            purpose=f"s{i}",
            base_url=f"http://127.0.0.1:{p}",
            endpoints=eps,
            features={"context": True},
        )
        for i, p in enumerate((port, *more_ports))
    ]
    with start_router(build_sources(profiles), {p.id: "c" for p in profiles}) as handle:

        async def main() -> dict[str, Any]:
            async with open_session(handle.url, handle.token) as session:
                result = await session.call_tool("context_recent", {"limit": 5})
                return result.model_dump(by_alias=True, mode="json", exclude_none=True)

        return anyio.run(main)


def test_a_result_that_is_not_a_tool_result_is_a_failed_source_not_a_crash() -> None:
    with _serve(_nonconformant_app({"content": "not a list"})) as port:

        async def main() -> None:
            conn = UpstreamConnection(f"http://127.0.0.1:{port}/v1/mcp/context", "c")
            try:
                await conn.call_tool("context_recent", {}, 10)
            finally:
                await conn.aclose()

        with pytest.raises(UpstreamCallError, match="malformed result") as info:
            anyio.run(main)
        assert info.value.sent and not info.value.answered
        answer = _router_answer(port)
    assert answer["isError"] is True and "did not answer" in answer["content"][0]["text"]


def test_a_passed_through_result_the_router_cannot_vouch_for_becomes_a_tool_error() -> None:
    # Right shape for the merge, but an image block without its data is no conformant CallToolResult.
    bad = {"content": [{"type": "image", "mimeType": "image/png"}], "isError": False}
    with _serve(_nonconformant_app(bad)) as port:
        single = _router_answer(port)
        with _serve(_nonconformant_app(bad)) as other:
            federated = _router_answer(port, other)
    assert single["isError"] is True and "malformed result" in single["content"][0]["text"]
    # Merged, the sources' content is reduced to their structured parts: the merge stays conformant.
    assert federated["isError"] is False and federated["structuredContent"]["partial"] is False


def test_redirects_are_followed_within_the_origin_only() -> None:
    ok = {"content": [{"type": "text", "text": "ok"}], "isError": False}
    with _serve(_nonconformant_app(ok)) as port:

        async def call(path: str) -> dict[str, Any]:
            conn = UpstreamConnection(f"http://127.0.0.1:{port}{path}", "c")
            try:
                return await conn.call_tool("context_recent", {}, 10)
            finally:
                await conn.aclose()

        assert anyio.run(call, "/moved")["content"][0]["text"] == "ok"
        with pytest.raises(UpstreamCallError, match="redirect not followed") as info:
            anyio.run(call, "/elsewhere")  # another origin (host), however close: never followed
    assert info.value.sent is False  # the handshake itself was refused: no tool call left
