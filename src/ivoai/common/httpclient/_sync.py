"""A lean, thread-safe HTTP/1.1 `httpx2.BaseTransport` on blocking sockets, framed by h11 (`_h11.py`).

Why not httpx2's own client: profiled per query embedding against a loopback TEI stand-in, httpx's
request path (client layers, cookie extraction, auth flow, httpcore's pool) cost several times the
CPU of one request on a plain socket (benchmarks/RESULTS.md, "TEI client" and the issue-21 section).
The server's embedding client (`server/context/embeddings.py`) calls this transport directly, once
per query embedding on every server a federated search reaches.

- One origin per transport, `http` or `https`; TLS with the context the caller's factory builds,
  once per transport (loading CA bundles costs tens of ms of CPU).
- Timeouts per operation from the request's `timeout` extension (`connect`, `read`, `write`; as
  httpx2 passes them), else the transport's default.
- Up to `idle_connections` idle connections are kept (no proxies, no redirects: those are the
  caller's business). An idle connection with anything to read (the peer closed it, or sent bytes
  unasked) is dropped before use. With `retry_stale`, a request whose kept-alive connection turns out
  closed before any answer byte arrived is sent once more on a new connection; only for requests
  without side effects.
- `close()` closes the idle connections; one in use is closed when its answer has been read (or not
  kept: a connection from before `close()` is never put back).
- Failures are httpx2's exceptions: `ConnectError`, `ConnectTimeout`, `WriteError`, `WriteTimeout`,
  `ReadError`, `ReadTimeout`, `RemoteProtocolError`, `LocalProtocolError`.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
from collections.abc import Callable, Iterator

import h11
import httpx2

from ivoai.common.httpclient._h11 import END_OF_ANSWER, NEED_DATA, ClientParser, request_event
from ivoai.common.httpclient._origin import READ_CHUNK_BYTES, Endpoint

_PEER_CLOSED = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
Seconds = float | None


class _Stale(Exception):
    """A kept-alive connection the peer had closed: nothing of an answer was received."""


class _Connection:
    """One socket to the origin, with its h11 state and the pool generation it belongs to."""

    def __init__(self, sock: socket.socket, head_max: int, generation: int) -> None:
        self.sock = sock
        self.parser = ClientParser(head_max)
        self.generation = generation
        self._timeout = sock.gettimeout()

    def set_timeout(self, seconds: Seconds) -> None:
        """The socket's timeout for the next operation (a system call only when it changes)."""
        if seconds != self._timeout:
            self.sock.settimeout(seconds)
            self._timeout = seconds

    def has_input(self) -> bool:
        """Anything to read on an idle connection (EOF, or bytes nobody asked for)."""
        try:
            return bool(select.select([self.sock], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def read_into_parser(self, request: httpx2.Request, timeout: Seconds) -> None:
        try:
            self.set_timeout(timeout)
            data = self.sock.recv(READ_CHUNK_BYTES)
        except TimeoutError:
            raise httpx2.ReadTimeout("timed out reading the answer", request=request) from None
        except OSError as exc:
            raise httpx2.ReadError(str(exc) or type(exc).__name__, request=request) from None
        self.parser.feed(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class _Body(httpx2.SyncByteStream):
    """An answer's body as it arrives; the connection goes back to the pool once it is read to the end."""

    def __init__(self, transport: SyncHttp11Transport, conn: _Connection, request: httpx2.Request) -> None:
        self._transport = transport
        self._conn = conn
        self._request = request
        self._timeout = _timeouts(request, transport.timeout)[2]
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        parser = self._conn.parser
        while (piece := parser.next_body(self._request)) is not END_OF_ANSWER:
            if piece is NEED_DATA:
                self._conn.read_into_parser(self._request, self._timeout)
            else:
                assert isinstance(piece, bytes)
                yield piece

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._conn.parser.settle(self._request):
            self._transport.release(self._conn)
        else:
            self._conn.close()


def _timeouts(request: httpx2.Request, default: Seconds) -> tuple[Seconds, Seconds, Seconds]:
    """(connect, write, read) seconds for `request`."""
    given = request.extensions.get("timeout") or {}
    return (
        given.get("connect", default),
        given.get("write", default),
        given.get("read", default),
    )


class SyncHttp11Transport(httpx2.BaseTransport):
    """HTTP/1.1 to one origin on blocking sockets, safe to share between threads (see the module doc)."""

    def __init__(
        self,
        origin_url: str,
        *,
        ssl_context: Callable[[], ssl.SSLContext],
        head_max_bytes: int,
        idle_connections: int,
        timeout: float | None = None,
        retry_stale: bool = False,
    ) -> None:
        """Raises:
        httpx2.InvalidURL, httpx2.UnsupportedProtocol: `origin_url` is not an http(s) URL with a host.
        """
        self.endpoint = Endpoint(origin_url, ssl_context, head_max_bytes)
        self.idle_connections = idle_connections
        self.timeout = timeout
        self.retry_stale = retry_stale
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._generation = 0  # bumped by close(): connections of an older generation are not kept

    def _connect(self, request: httpx2.Request, generation: int) -> _Connection:
        timeout = _timeouts(request, self.timeout)[0]
        try:
            origin = self.endpoint.origin
            sock = socket.create_connection((origin.host, origin.port), timeout=timeout)
        except TimeoutError:
            raise httpx2.ConnectTimeout("timed out connecting", request=request) from None
        except OSError as exc:  # refused, unreachable, name resolution
            raise httpx2.ConnectError(str(exc) or type(exc).__name__, request=request) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self.endpoint.tls()
            if tls is not None:
                sock = tls.wrap_socket(sock, server_hostname=origin.host)
        except TimeoutError:
            sock.close()
            raise httpx2.ConnectTimeout("timed out in the TLS handshake", request=request) from None
        except OSError as exc:  # TLS verification (ssl.SSLError is an OSError)
            sock.close()
            raise httpx2.ConnectError(str(exc) or type(exc).__name__, request=request) from None
        return _Connection(sock, self.endpoint.head_max_bytes, generation)

    def _acquire(self, request: httpx2.Request) -> tuple[_Connection, bool]:
        """An idle connection with nothing to read (reused=True), else a new one."""
        while True:
            with self._lock:
                generation = self._generation
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._connect(request, generation), False
            if not conn.has_input():
                return conn, True
            conn.close()

    def release(self, conn: _Connection) -> None:
        """Keep a connection whose answer was read to the end for the next request (or close it)."""
        with self._lock:
            if conn.generation == self._generation and len(self._idle) < self.idle_connections:
                self._idle.append(conn)
                return
        conn.close()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.endpoint.origin.check(request)
        head = request_event(request)  # refused here, before a connection is opened
        for attempt in (1, 2):
            conn, reused = self._acquire(request)
            try:
                answer = self._exchange(conn, head, request)
            except _Stale:
                conn.close()
                if reused and attempt == 1 and self.retry_stale:
                    continue
                raise httpx2.RemoteProtocolError(
                    "server disconnected without sending a response", request=request
                ) from None
            except BaseException:
                conn.close()
                raise
            return httpx2.Response(
                answer.status_code,
                headers=answer.headers.raw_items(),
                stream=_Body(self, conn, request),
                extensions={"http_version": b"HTTP/" + answer.http_version, "reason_phrase": answer.reason},
            )
        raise AssertionError("unreachable")  # pragma: no cover

    def _exchange(self, conn: _Connection, head: h11.Request, request: httpx2.Request) -> h11.Response:
        """Send the request; the answer's head.

        Raises:
            _Stale: the peer had closed the connection: nothing of an answer arrived.
        """
        _, write_timeout, read_timeout = _timeouts(request, self.timeout)
        data = conn.parser.request_bytes(head, request)
        try:
            conn.set_timeout(write_timeout)
            conn.sock.sendall(data)
        except TimeoutError:
            raise httpx2.WriteTimeout("timed out sending the request", request=request) from None
        except _PEER_CLOSED:
            raise _Stale from None
        except OSError as exc:
            raise httpx2.WriteError(str(exc) or type(exc).__name__, request=request) from None
        while True:  # nothing can be buffered yet: read first
            try:
                conn.set_timeout(read_timeout)
                data = conn.sock.recv(READ_CHUNK_BYTES)
            except TimeoutError:
                raise httpx2.ReadTimeout("timed out waiting for the answer", request=request) from None
            except _PEER_CLOSED:
                if conn.parser.received == 0:
                    raise _Stale from None
                raise httpx2.ReadError("the server reset the connection", request=request) from None
            except OSError as exc:
                raise httpx2.ReadError(str(exc) or type(exc).__name__, request=request) from None
            if not data and conn.parser.received == 0:
                raise _Stale
            conn.parser.feed(data)
            answer = conn.parser.next_head(request)
            if answer is not None:
                return answer

    def close(self) -> None:
        """Close the idle connections; a connection in use is closed when its answer has been read."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1
        for conn in idle:
            conn.close()
