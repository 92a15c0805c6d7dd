"""A fault-injecting HTTP reverse proxy placed in front of a REAL ivoai server, for router tests.

It is not an imitation of the server: every request it lets through is forwarded byte-for-byte
(streamed) to the real server, and the answer streamed back. What it adds is network misbehaviour
that a real deployment can show and a test must be able to cause on demand:

- `hold`: tools/call requests wait (bounded) until `release()` — a server slowed past any deadline;
- `drop_response_for`: forward a tools/call for these tools, let the server apply it, then cut the
  connection mid-response — a response lost after the side effect;
- `fail_prefix`: answer 503 for paths under this prefix — an MCP service that is down (probe failures);
- `fail_next_tool_calls`: answer the next N tools/call requests with 503 — a transient failure;
- `redirect_to`: answer `redirect_paths` (default: discovery and enrollment) with a 307 to another
  origin;
- `override`: answer these paths with a fixed JSON document (e.g. a discovery document of another
  protocol major, or a `/ready` that is not ready) — a server of another version or state;
- `counts`: how many tools/call requests per tool name reached the real server; `paths`: every
  request seen (method and path); `authorizations`: every Authorization header value seen.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import Counter
from typing import Any

import httpx2
import uvicorn
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

HOLD_MAX_SECONDS = 60.0  # a held request is released at the latest after this (never hangs a test run)
_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


class FaultProxy:
    """Reverse proxy on 127.0.0.1:<ephemeral> forwarding to `upstream` (a real server's base URL)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.hold = False
        self.drop_response_for: set[str] = set()
        self.fail_prefix: str | None = None
        self.redirect_to: str | None = None
        self.override: dict[str, tuple[int, Any]] = {}
        self.fail_next_tool_calls = 0
        self.counts: Counter[str] = Counter()
        self.requests = 0
        self.paths: list[str] = []
        self.authorizations: set[str] = set()
        self.redirect_paths: set[str] = {"/.well-known/ivoai", "/v1/enroll"}
        self._release = threading.Event()
        self._client: httpx2.AsyncClient | None = None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(uvicorn.Config(self, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)

    def start(self) -> FaultProxy:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fault proxy did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self.release()
        self._server.should_exit = True
        self._thread.join(10)

    def reset(self) -> None:
        """Back to plain forwarding (releases held requests)."""
        self.release()
        self.hold = False
        self.drop_response_for = set()
        self.fail_prefix = None
        self.redirect_to = None
        self.redirect_paths = {"/.well-known/ivoai", "/v1/enroll"}
        self.override = {}
        self.fail_next_tool_calls = 0
        self._release = threading.Event()

    def release(self) -> None:
        self._release.set()

    async def _wait_release(self) -> None:
        deadline = time.monotonic() + HOLD_MAX_SECONDS
        while not self._release.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self._client = httpx2.AsyncClient(timeout=httpx2.Timeout(120.0), trust_env=False)
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    if self._client is not None:
                        await self._client.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http" or self._client is None:
            return
        request = Request(scope, receive)
        body = await request.body()
        path = request.url.path
        self.requests += 1
        self.paths.append(f"{request.method} {path}")
        if "authorization" in request.headers:
            self.authorizations.add(request.headers["authorization"])
        if self.redirect_to and path in self.redirect_paths:
            await Response(status_code=307, headers={"location": self.redirect_to + path})(
                scope, receive, send
            )
            return
        if path in self.override:
            status, doc = self.override[path]
            payload = json.dumps(doc).encode()
            await Response(payload, status_code=status, media_type="application/json")(scope, receive, send)
            return
        if self.fail_prefix and path.startswith(self.fail_prefix):
            await Response(status_code=503, content=b"unavailable")(scope, receive, send)
            return
        tool = _tool_name(body)
        if tool is not None and self.fail_next_tool_calls > 0:
            self.fail_next_tool_calls -= 1
            await Response(status_code=503, content=b"unavailable")(scope, receive, send)
            return
        if tool is not None:
            self.counts[tool] += 1
            if self.hold:
                await self._wait_release()
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        upstream = self._client.build_request(
            request.method,
            self.upstream + path + ("?" + request.url.query if request.url.query else ""),
            headers=headers,
            content=body,
        )
        response = await self._client.send(upstream, stream=True)
        if tool is not None and tool in self.drop_response_for:
            await response.aread()  # the server has applied it
            await response.aclose()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"100000")],
                }
            )
            await send({"type": "http.response.body", "body": b'{"jsonrpc":', "more_body": True})
            raise ConnectionAbortedError("fault proxy: response dropped after the upstream applied the call")
        out_headers = {k: v for k, v in response.headers.items() if k.lower() not in _HOP}

        async def stream() -> Any:
            try:
                async for chunk in response.aiter_raw():
                    yield chunk
            finally:
                await response.aclose()

        await StreamingResponse(stream(), status_code=response.status_code, headers=out_headers)(
            scope, receive, send
        )


def _tool_name(body: bytes) -> str | None:
    if not body:
        return None
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, dict) and message.get("method") == "tools/call":
        params = message.get("params") or {}
        name = params.get("name") if isinstance(params, dict) else None
        return name if isinstance(name, str) else None
    return None
