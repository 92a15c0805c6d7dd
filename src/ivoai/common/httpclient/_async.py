"""A lean HTTP/1.1 `httpx2.AsyncBaseTransport` on asyncio streams, framed by h11 (`_h11.py`).

Why not httpx2's own transport: measured against a loopback server answering 4 KiB of JSON, one POST
through `httpx2.AsyncHTTPTransport` (httpcore2's pool, anyio stream wrappers, trace hooks) costs
several times the CPU of the same exchange on asyncio streams (figures: benchmarks/RESULTS.md,
"Router: upstream calls on a lean HTTP/1.1 transport" and the issue-21 section). The knowledge
router makes one such call per source of a federated read, and on a machine shared with the servers
that CPU is latency.

What it does, and deliberately no more:

- one origin per transport (a request for another origin is refused); `http` or `https` only;
- TLS with the context the caller's factory builds (once per transport);
- each request is written in one send (head and body together) with TCP_NODELAY set;
- framing, interim answers, head cap and keep-alive decisions by h11 plus `_h11.ClientParser`'s
  policy; kept-alive connections are reused while fresh (`keepalive_seconds` idle at most, and only
  when the server has not closed them); a connection whose answer was not read to the end, or that
  was interrupted (cancelled, failed), is closed, never reused;
- failures raised as httpx2's exceptions (`ConnectError`, `ConnectTimeout`, `WriteError`,
  `ReadError`, `RemoteProtocolError`, `LocalProtocolError`).

The connect step is bounded by the request's `timeout` extension (`connect`); reading the answer is
bounded by the caller's deadline. It needs the asyncio event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable

import httpx2

from ivoai.common.httpclient._h11 import END_OF_ANSWER, NEED_DATA, ClientParser, request_event
from ivoai.common.httpclient._origin import READ_CHUNK_BYTES, Endpoint


class _Connection:
    """One TCP (or TLS) connection to the origin, with its h11 state."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head_max: int, expiry: float
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.parser = ClientParser(head_max)
        self.idle_since = time.monotonic()
        self.expiry = expiry

    def usable(self) -> bool:
        """Open on both sides (a server that closed it has sent EOF) and idle for less than the expiry."""
        return (
            not self.writer.is_closing()
            and not self.reader.at_eof()
            and time.monotonic() - self.idle_since < self.expiry
        )

    async def read_into_parser(self, request: httpx2.Request) -> None:
        try:
            data = await self.reader.read(READ_CHUNK_BYTES)
        except OSError as exc:
            raise httpx2.ReadError(str(exc) or type(exc).__name__, request=request) from None
        self.parser.feed(data)

    def close(self) -> None:
        self.writer.close()


class _Body(httpx2.AsyncByteStream):
    """An answer's body as it arrives; the connection goes back to the pool once it is read to the end."""

    def __init__(self, transport: AsyncHttp11Transport, conn: _Connection, request: httpx2.Request) -> None:
        self._transport = transport
        self._conn = conn
        self._request = request
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        parser = self._conn.parser
        while (piece := parser.next_body(self._request)) is not END_OF_ANSWER:
            if piece is NEED_DATA:
                await self._conn.read_into_parser(self._request)
            else:
                assert isinstance(piece, bytes)
                yield piece

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._conn.parser.settle(self._request):
            self._transport.release(self._conn)
        else:
            self._conn.close()


class AsyncHttp11Transport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 to one origin on asyncio streams (see the module doc)."""

    def __init__(
        self,
        origin_url: str,
        *,
        ssl_context: Callable[[], ssl.SSLContext],
        head_max_bytes: int,
        keepalive_seconds: float,
        idle_connections: int,
    ) -> None:
        """Raises:
        httpx2.InvalidURL, httpx2.UnsupportedProtocol: `origin_url` is not an http(s) URL with a host.
        """
        self.endpoint = Endpoint(origin_url, ssl_context, head_max_bytes)
        self.keepalive_seconds = keepalive_seconds
        self.idle_connections = idle_connections
        self.idle: list[_Connection] = []
        self._closed = False

    async def _connect(self, request: httpx2.Request) -> _Connection:
        timeout = request.extensions.get("timeout", {}).get("connect")
        origin = self.endpoint.origin
        tls = self.endpoint.tls()
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    origin.host,
                    origin.port,
                    ssl=tls,
                    server_hostname=origin.host if tls is not None else None,
                    limit=READ_CHUNK_BYTES,
                )
        except TimeoutError:
            raise httpx2.ConnectTimeout("timed out connecting", request=request) from None
        except OSError as exc:  # refused, unreachable, name resolution, TLS verification (SSLError)
            raise httpx2.ConnectError(str(exc) or type(exc).__name__, request=request) from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(reader, writer, self.endpoint.head_max_bytes, self.keepalive_seconds)

    def release(self, conn: _Connection) -> None:
        """Keep a connection whose answer was read to the end for the next request (or close it)."""
        if self._closed or len(self.idle) >= self.idle_connections:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self.idle.append(conn)

    async def _acquire(self, request: httpx2.Request) -> _Connection:
        while self.idle:
            conn = self.idle.pop()
            if conn.usable():
                return conn
            conn.close()
        return await self._connect(request)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._closed:
            raise httpx2.ConnectError("the transport is closed", request=request)
        self.endpoint.origin.check(request)
        head = request_event(request)  # refused here, before a connection is opened
        conn = await self._acquire(request)
        try:
            data = conn.parser.request_bytes(head, request)
            try:
                conn.writer.write(data)
                await conn.writer.drain()
            except OSError as exc:
                raise httpx2.WriteError(str(exc) or type(exc).__name__, request=request) from None
            while True:  # nothing can be buffered yet: read first
                await conn.read_into_parser(request)
                answer = conn.parser.next_head(request)
                if answer is not None:
                    break
        except BaseException:
            conn.close()
            raise
        version = b"HTTP/" + answer.http_version
        return httpx2.Response(
            answer.status_code,
            headers=answer.headers.raw_items(),
            stream=_Body(self, conn, request),
            extensions={"http_version": version, "reason_phrase": answer.reason},
        )

    async def aclose(self) -> None:
        self._closed = True
        idle, self.idle = self.idle, []
        for conn in idle:
            conn.close()
