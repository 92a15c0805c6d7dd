"""The router's own surface, without any upstream: capability token, request cap, lifecycle, selectors."""

from __future__ import annotations

import socket
import threading
from typing import Any

import anyio
import httpx2
import pytest

from ivoai.client.config.secrets import SecretsStore
from ivoai.client.connections.registry import ConnectionRegistry
from ivoai.client.knowledge.errors import NoSourcesError, UnknownSourceError
from ivoai.client.knowledge.profiles import ServerProfile, build_sources
from ivoai.client.knowledge.router import (
    RouterConfig,
    enabled_sources,
    start_router,
    start_session_router,
)
from ivoai.client.knowledge.upstream import (
    CrossOriginRefused,
    OriginBoundTransport,
    UpstreamResponseTooLarge,
    open_session,
)
from ivoai.common.limits import ROUTER_REQUEST_MAX_BYTES
from ivoai.common.paths import XdgPaths

EPS = {"context_mcp": "/v1/mcp/context", "memory_mcp": "/v1/memory/mcp"}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _profile(alias: str, port: int, **kw: Any) -> ServerProfile:
    return ServerProfile(
        id=f"srv_{alias.encode().hex():0>32}",
        alias=alias,
        base_url=f"http://127.0.0.1:{port}",
        purpose=kw.pop("purpose", alias),
        endpoints=EPS,
        features={"context": True, "memory": True},
        **kw,
    )


def _enroll_locally(xdg: XdgPaths, *profiles: ServerProfile) -> None:
    for p in profiles:
        SecretsStore(xdg).put(p.id, "credential-" + p.alias)
    with ConnectionRegistry(xdg).update() as state:
        state.servers.extend(profiles)


def test_router_binds_loopback_and_refuses_missing_or_wrong_tokens(xdg: XdgPaths) -> None:
    p = _profile("a", _closed_port())
    with start_router(build_sources([p]), {p.id: "c"}) as handle:
        assert handle.url.startswith("http://127.0.0.1:") and handle.url.endswith("/mcp")
        assert handle.token not in repr(handle)
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": handle.token}):
            r = httpx2.post(handle.url, json=body, headers=headers, trust_env=False)
            assert r.status_code == 401
            assert r.headers["www-authenticate"] == "Bearer"


def test_router_answers_its_status_tool_with_the_right_token(xdg: XdgPaths) -> None:
    p = _profile("a", _closed_port())
    with start_router(build_sources([p]), {p.id: "c"}, RouterConfig(source_deadline_seconds=2)) as handle:

        async def main() -> dict[str, Any]:
            async with open_session(handle.url, handle.token) as session:
                tools = (await session.list_tools()).tools
                # The upstream is unreachable: the fixed protocol-1 names are offered, marked as such.
                assert [t.name for t in tools] == [
                    "knowledge_status",
                    "context_search",
                    "context_get_document",
                    "context_recent",
                    "context_health",
                    "memory_query",
                    "memory_recent",
                    "memory_read_page",
                    "memory_status",
                    "memory_write_page",
                    "memory_feedback",
                    "memory_delete_page",
                ]
                assert all("no server answered" in (t.description or "") for t in tools[1:])
                assert "knowledge_source" in tools[1].input_schema["properties"]
                result = await session.call_tool("knowledge_status", {})
                assert result.structured_content is not None
                return dict(result.structured_content)

        status = anyio.run(main)
    assert status["sources"][0]["id"] == "a" and status["sources"][0]["kinds"] == ["context", "memory"]


def test_requests_over_four_mib_are_refused_before_parsing(xdg: XdgPaths) -> None:
    p = _profile("a", _closed_port())
    with start_router(build_sources([p]), {p.id: "c"}) as handle:
        big = (
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"'
            + b"a" * ROUTER_REQUEST_MAX_BYTES
            + b'"}}'
        )
        r = httpx2.post(
            handle.url,
            content=big,
            trust_env=False,
            headers={
                "authorization": f"Bearer {handle.token}",
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
            },
        )
        assert r.status_code == 413


def test_close_stops_the_listener_and_its_thread(xdg: XdgPaths) -> None:
    p = _profile("a", _closed_port())
    handle = start_router(build_sources([p]), {p.id: "c"})
    port = int(handle.url.rsplit(":", 1)[1].split("/")[0])
    handle.close()
    assert not any(t.name == "ivoai-knowledge-router" and t.is_alive() for t in threading.enumerate())
    with pytest.raises(httpx2.ConnectError):
        httpx2.post(f"http://127.0.0.1:{port}/mcp", json={}, trust_env=False)


def test_session_router_with_nothing_enrolled_raises_and_enabled_sources_is_empty(xdg: XdgPaths) -> None:
    assert enabled_sources(xdg) == []
    with pytest.raises(NoSourcesError):
        start_session_router(paths=xdg)


def test_session_router_unknown_selector_names_the_valid_choices(xdg: XdgPaths) -> None:
    _enroll_locally(xdg, _profile("docs", _closed_port()), _profile("team", _closed_port()))
    with pytest.raises(UnknownSourceError, match="'wiki'.*docs, team"):
        start_session_router(["wiki"], paths=xdg)


def test_session_router_exposes_selected_authoritative_sources(xdg: XdgPaths) -> None:
    _enroll_locally(xdg, _profile("docs", _closed_port()), _profile("team", _closed_port()))
    with start_session_router(["team"], paths=xdg) as handle:
        assert [(s.id, s.alias, sorted(s.kinds), s.authoritative) for s in handle.sources] == [
            ("team", "team", ["context", "memory"], True)
        ]


# ---- the credential guard of every upstream request ---------------------------------------------


def _guarded(handler: Any, limit: int = 1024) -> httpx2.AsyncClient:
    """OriginBoundTransport over httpx2's MockTransport (stands in for the network only)."""
    inner = httpx2.MockTransport(handler)
    return httpx2.AsyncClient(
        transport=OriginBoundTransport("https://a.example", "cred-a", max_response_bytes=limit, inner=inner)
    )


def test_the_credential_goes_only_to_its_own_origin() -> None:
    seen: list[tuple[str, str | None]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append((str(request.url), request.headers.get("authorization")))
        return httpx2.Response(200, content=b"ok")

    async def main() -> None:
        async with _guarded(handler) as client:
            assert (await client.get("https://a.example/v1/mcp/context")).status_code == 200
            for other in ("https://b.example/x", "http://a.example/x", "https://a.example:444/x"):
                with pytest.raises(CrossOriginRefused):
                    await client.get(other)

    anyio.run(main)
    assert seen == [("https://a.example/v1/mcp/context", "Bearer cred-a")]


def test_upstream_responses_over_the_cap_are_refused() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=b"x" * 2048)

    def chunked(request: httpx2.Request) -> httpx2.Response:
        async def body() -> Any:
            for _ in range(4):
                yield b"y" * 512

        return httpx2.Response(200, content=body())

    async def main() -> None:
        async with _guarded(handler) as client:
            with pytest.raises(UpstreamResponseTooLarge):
                await client.get("https://a.example/x")
        async with _guarded(chunked) as client:
            with pytest.raises(UpstreamResponseTooLarge):
                await client.get("https://a.example/x")

    anyio.run(main)


def test_importing_the_router_api_loads_no_server_or_http_stack() -> None:
    import json as _json
    import subprocess
    import sys

    code = (
        "import sys, json; import ivoai.client.knowledge.router as r; r.enabled_sources(); "
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    heavy = ("ivoai.server", "mcp", "uvicorn", "starlette", "httpx2", "httpx", "pydantic", "anyio")
    assert [m for m in _json.loads(out.stdout) if m.split(".")[0] in heavy or m.startswith(heavy)] == []


def test_a_router_writes_nothing_to_the_terminal_the_agent_draws_on(xdg: XdgPaths) -> None:
    """Bad requests, wrong tokens and an unreachable upstream leave the host process's stderr empty."""
    import json as _json
    import os
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from ivoai.client.knowledge.profiles import ServerProfile, build_sources\n"
        "from ivoai.client.knowledge.router import RouterConfig, start_router\n"
        f"p = ServerProfile(id='srv_' + 'd' * 32, alias='a', base_url='http://127.0.0.1:{_closed_port()}',\n"
        "    purpose='a', endpoints={'context_mcp': '/x'}, features={'context': True})\n"
        "h = start_router(build_sources([p]), {p.id: 'c'}, RouterConfig(source_deadline_seconds=2))\n"
        "print(json.dumps({'url': h.url, 'token': h.token}), flush=True)\n"
        "sys.stdin.read()\n"
        "h.close()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        info = _json.loads(proc.stdout.readline())
        host, port = info["url"].split("//")[1].split("/")[0].split(":")
        with socket.create_connection((host, int(port))) as raw:
            raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            raw.recv(1024)
        httpx2.post(info["url"], json={}, headers={"authorization": "Bearer wrong"}, trust_env=False)

        async def main() -> None:
            async with open_session(info["url"], info["token"]) as session:
                await session.call_tool("knowledge_status", {})
                await session.call_tool("context_search", {"query": "x"})

        anyio.run(main)
        proc.stdin.close()
        proc.wait(30)
        assert proc.stderr is not None
        assert proc.stderr.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
