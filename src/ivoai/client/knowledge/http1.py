"""A lean HTTP/1.1 client transport on asyncio streams, for the router's calls to its upstreams.

Why not httpx2's own transport: measured here against a loopback server answering 4 KiB of JSON,
one POST through `httpx2.AsyncHTTPTransport` (httpcore2's pool, anyio stream wrappers, h11, trace
hooks) costs 0.61 ms of CPU; the same exchange on asyncio streams 0.06 ms. A federated read makes one
such call per source, and on a machine shared with the servers that CPU is latency.

What it does, and deliberately no more (it serves `_McpHttpSession`, which sends JSON-RPC POSTs and
the session's DELETE; `OriginBoundTransport` around it binds the origin, adds the credential and caps
the body):

- one origin per transport (a request for another origin is refused); `http` or `https` only;
- TLS with `httpx2.create_ssl_context()`: the certificate chain and host name are verified exactly
  as httpx2 verifies them; the context is built once per transport;
- each request is written in one send (head and body together) with TCP_NODELAY set;
- answers framed by Content-Length, chunked transfer coding, or the end of the connection; ambiguous
  framing (Content-Length with Transfer-Encoding, differing Content-Length values) is refused, never
  resolved by picking a header; interim 1xx answers skipped; heads capped at RESPONSE_HEAD_MAX_BYTES;
- kept-alive connections reused while fresh (KEEPALIVE_EXPIRY_SECONDS idle at most, and only when
  the server has not closed them); a connection whose answer was not read to the end, or that was
  interrupted (cancelled, failed), is closed, never reused;
- failures raised as httpx2's exceptions (`ConnectError`, `ConnectTimeout`, `WriteError`,
  `ReadError`, `RemoteProtocolError`, `LocalProtocolError`), which the router already handles.

The connect step is bounded by the request's `timeout` extension (`connect`); reading the answer is
bounded by the caller's deadline (every router call runs under one). It needs the asyncio event loop,
which the router runs on.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from ivoai.common.limits import (
    ROUTER_UPSTREAM_HEAD_MAX_BYTES,
    ROUTER_UPSTREAM_IDLE_CONNECTIONS,
    ROUTER_UPSTREAM_KEEPALIVE_SECONDS,
)

KEEPALIVE_EXPIRY_SECONDS = ROUTER_UPSTREAM_KEEPALIVE_SECONDS
KEEPALIVE_MAX_CONNECTIONS = ROUTER_UPSTREAM_IDLE_CONNECTIONS
RESPONSE_HEAD_MAX_BYTES = ROUTER_UPSTREAM_HEAD_MAX_BYTES
READ_CHUNK_BYTES = 64 * 1024  # one read from the socket, not a limit
_NO_BODY_STATUSES = frozenset({204, 304})


class _Connection:
    """One TCP (or TLS) connection to the origin."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = time.monotonic()

    def usable(self) -> bool:
        """Open on both sides (a server that closed it has sent EOF) and idle for less than the expiry."""
        return (
            not self.writer.is_closing()
            and not self.reader.at_eof()
            and time.monotonic() - self.idle_since < KEEPALIVE_EXPIRY_SECONDS
        )

    def close(self) -> None:
        self.writer.close()


class _Body(httpx2.AsyncByteStream):
    """An answer's body as it arrives; the connection goes back to the pool once it is read to the end."""

    def __init__(
        self,
        transport: Http11Transport,
        conn: _Connection,
        request: httpx2.Request,
        *,
        length: int | None,
        chunked: bool,
        reusable: bool,
    ) -> None:
        self._transport = transport
        self._conn = conn
        self._request = request
        self._length = length
        self._chunked = chunked
        self._reusable = reusable
        self._done = length == 0 and not chunked
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            if self._chunked:
                async for piece in self._chunks():
                    yield piece
            elif self._length is not None:
                remaining = self._length
                while remaining:
                    piece = await self._read(min(remaining, READ_CHUNK_BYTES))
                    if not piece:
                        raise httpx2.RemoteProtocolError(
                            "server closed the connection before the end of the answer", request=self._request
                        )
                    remaining -= len(piece)
                    yield piece
            else:  # delimited by the end of the connection
                while piece := await self._read(READ_CHUNK_BYTES):
                    yield piece
                self._reusable = False
            self._done = True
        except BaseException:
            self._reusable = False
            raise

    async def _read(self, n: int) -> bytes:
        try:
            return await self._conn.reader.read(n)
        except OSError as exc:
            raise httpx2.ReadError(str(exc) or type(exc).__name__, request=self._request) from None

    async def _line(self) -> bytes:
        try:
            return await self._conn.reader.readuntil(b"\r\n")
        except asyncio.IncompleteReadError:
            raise httpx2.RemoteProtocolError("incomplete chunked answer", request=self._request) from None
        except asyncio.LimitOverrunError:
            raise httpx2.RemoteProtocolError("chunk header too long", request=self._request) from None
        except OSError as exc:
            raise httpx2.ReadError(str(exc) or type(exc).__name__, request=self._request) from None

    async def _chunks(self) -> AsyncIterator[bytes]:
        while True:
            size_line = (await self._line()).split(b";", 1)[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                raise httpx2.RemoteProtocolError("malformed chunk size", request=self._request) from None
            if size < 0:
                raise httpx2.RemoteProtocolError("malformed chunk size", request=self._request)
            if size == 0:
                while (await self._line()) != b"\r\n":  # trailers: ignored
                    pass
                return
            remaining = size
            while remaining:
                piece = await self._read(min(remaining, READ_CHUNK_BYTES))
                if not piece:
                    raise httpx2.RemoteProtocolError("incomplete chunked answer", request=self._request)
                remaining -= len(piece)
                yield piece
            if await self._line() != b"\r\n":
                raise httpx2.RemoteProtocolError("malformed chunk end", request=self._request)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._done and self._reusable:
            self._transport.release(self._conn)
        else:
            self._conn.close()


def _body_framing(headers: list[tuple[bytes, bytes]], request: httpx2.Request) -> tuple[int | None, bool]:
    """(Content-Length or None, chunked) of an answer that has a body.

    Ambiguous framing is refused, never resolved by picking one header (that is how request and
    response smuggling work): Content-Length together with Transfer-Encoding, and Content-Length
    values that differ (repeated identical values are one length, RFC 9110 §8.6). The only transfer
    coding is `chunked`, alone.

    Raises:
        httpx2.RemoteProtocolError: ambiguous or malformed framing.
    """
    lengths: list[bytes] = []
    codings: list[bytes] = []
    for key, value in headers:  # one pass; a field may repeat or list values (RFC 9110 §5.3)
        name = key.lower()
        if name == b"content-length":
            lengths.append(value)
        elif name == b"transfer-encoding":
            codings.append(value)
    if lengths and codings:
        raise httpx2.RemoteProtocolError(
            "an answer with both Content-Length and Transfer-Encoding is ambiguous", request=request
        )
    if codings:
        listed = [c.strip().lower() for c in b",".join(codings).split(b",") if c.strip()]
        if listed != [b"chunked"]:
            raise httpx2.RemoteProtocolError("unsupported transfer coding", request=request)
        return None, True
    if not lengths:
        return None, False
    if len(lengths) == 1 and b"," not in lengths[0]:  # the usual answer: one plain value
        text = lengths[0].strip()
        if not text.isdigit():
            raise httpx2.RemoteProtocolError("malformed Content-Length", request=request)
        return int(text), False
    values = [v.strip() for v in b",".join(lengths).split(b",")]
    if not all(text.isdigit() for text in values):
        raise httpx2.RemoteProtocolError("malformed Content-Length", request=request)
    if len({int(text) for text in values}) > 1:
        raise httpx2.RemoteProtocolError("conflicting Content-Length values", request=request)
    return int(values[0]), False


class Http11Transport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 to one origin on asyncio streams (see the module doc)."""

    def __init__(self, origin_url: str, *, trust_env: bool = False) -> None:
        url = httpx2.URL(origin_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"unsupported URL for the HTTP/1.1 transport: {url.scheme}://…")
        self.scheme = url.scheme
        self.host = url.host
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self._trust_env = trust_env
        self._ssl: ssl.SSLContext | None = None
        self.idle: list[_Connection] = []
        self._closed = False

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = httpx2.create_ssl_context(trust_env=self._trust_env)
        return self._ssl

    async def _connect(self, request: httpx2.Request) -> _Connection:
        timeout = request.extensions.get("timeout", {}).get("connect")
        tls = self._ssl_context() if self.scheme == "https" else None
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=tls,
                    server_hostname=self.host if tls is not None else None,
                    limit=RESPONSE_HEAD_MAX_BYTES,
                )
        except TimeoutError:
            raise httpx2.ConnectTimeout("timed out connecting", request=request) from None
        except OSError as exc:  # refused, unreachable, name resolution, TLS verification (SSLError)
            raise httpx2.ConnectError(str(exc) or type(exc).__name__, request=request) from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(reader, writer)

    def release(self, conn: _Connection) -> None:
        """Keep a connection whose answer was read to the end for the next request (or close it)."""
        if self._closed or len(self.idle) >= KEEPALIVE_MAX_CONNECTIONS:
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

    def _head(self, request: httpx2.Request) -> bytes:
        target = request.url.raw_path or b"/"
        lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
        for name, value in request.headers.raw:
            if b"\r" in name or b"\n" in name or b"\r" in value or b"\n" in value:
                raise httpx2.LocalProtocolError("a header contains a line break", request=request)
            lines.append(name + b": " + value)
        return b"\r\n".join(lines) + b"\r\n\r\n"

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._closed:
            raise httpx2.ConnectError("the transport is closed", request=request)
        url = request.url
        if (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80)) != (
            self.scheme,
            self.host,
            self.port,
        ):
            raise httpx2.LocalProtocolError("this transport serves one origin only", request=request)
        content = request.content  # the router's requests are built from bytes, never streamed
        data = self._head(request) + content
        conn = await self._acquire(request)
        try:
            try:
                conn.writer.write(data)
                await conn.writer.drain()
            except OSError as exc:
                raise httpx2.WriteError(str(exc) or type(exc).__name__, request=request) from None
            status, reason, headers = await self._read_head(conn, request)
            length: int | None
            if request.method == "HEAD" or status in _NO_BODY_STATUSES:
                length, chunked = 0, False
            else:
                length, chunked = _body_framing(headers, request)
            connection = b",".join(v for k, v in headers if k.lower() == b"connection").lower()
            reusable = b"close" not in connection and (length is not None or chunked)
        except BaseException:
            conn.close()
            raise
        stream = _Body(self, conn, request, length=length, chunked=chunked, reusable=reusable)
        return httpx2.Response(
            status,
            headers=headers,
            stream=stream,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
        )

    async def _read_head(
        self, conn: _Connection, request: httpx2.Request
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        while True:
            try:
                raw = await conn.reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                raise httpx2.RemoteProtocolError(
                    "server disconnected without sending a response", request=request
                ) from None
            except asyncio.LimitOverrunError:
                raise httpx2.RemoteProtocolError(
                    f"response head over {RESPONSE_HEAD_MAX_BYTES} bytes", request=request
                ) from None
            except OSError as exc:
                raise httpx2.ReadError(str(exc) or type(exc).__name__, request=request) from None
            status_line, *lines = raw[:-4].split(b"\r\n")
            parts = status_line.split(b" ", 2)
            if (
                len(parts) < 2
                or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0")
                or not parts[1].isdigit()
                or len(parts[1]) != 3
            ):
                raise httpx2.RemoteProtocolError("malformed status line", request=request)
            status = int(parts[1])
            headers: list[tuple[bytes, bytes]] = []
            for line in lines:
                name, sep, value = line.partition(b":")
                if not sep or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
                    raise httpx2.RemoteProtocolError("malformed header line", request=request)
                headers.append((name, value.strip()))
            if 100 <= status < 200:
                if status == 101:
                    raise httpx2.RemoteProtocolError("unexpected protocol switch", request=request)
                continue  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            if parts[0] == b"HTTP/1.0":  # no keep-alive negotiation with a 1.0 server: one answer, then close
                headers.append((b"connection", b"close"))
            return status, parts[2] if len(parts) > 2 else b"", headers

    async def aclose(self) -> None:
        self._closed = True
        idle, self.idle = self.idle, []
        for conn in idle:
            conn.close()


def connection_count(transport: Any) -> int:
    """Idle kept-alive connections of an `Http11Transport` (tests and diagnostics)."""
    return len(transport.idle) if isinstance(transport, Http11Transport) else 0
