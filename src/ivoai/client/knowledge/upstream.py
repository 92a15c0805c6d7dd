"""Upstream MCP clients: one per (server profile, service), each credential bound to its own origin.

The MCP SDK client (`streamable_http_client` + `ClientSession`) talks to the server through an
httpx2 transport that (1) refuses any request whose origin is not the profile's origin, so a
credential can never leave for another host even if a redirect or a bug asked for it, (2) adds the
`Authorization` header itself, so the header is not a client default that could be copied anywhere,
and (3) caps every response body at the router's upstream limit (16 MiB), counting bytes as they
arrive. The SDK itself follows redirects only within the endpoint's origin.

A connection keeps one initialized MCP session open (owned by a dedicated task, as anyio requires)
and reopens it after any failure.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import httpx2
from anyio.abc import TaskGroup, TaskStatus

from ivoai.client.knowledge.profiles import origin_of
from ivoai.common.limits import ROUTER_UPSTREAM_RESPONSE_MAX_BYTES

if TYPE_CHECKING:
    import mcp.types as mcp_types
    from mcp import ClientSession

log = logging.getLogger(__name__)

# JSON-RPC errors only a server that parsed the request sends (never synthesized by the SDK transport).
_SERVER_REFUSALS = frozenset({-32602, -32601})  # invalid params, method not found
CONNECT_TIMEOUT_SECONDS = 10.0  # TCP/TLS connect to an upstream; the per-call deadline bounds the rest


class CrossOriginRefused(httpx2.TransportError):
    """A request to an origin other than the credential's own; never sent."""


class UpstreamResponseTooLarge(httpx2.TransportError):
    """An upstream response body exceeded the router's cap."""


class UpstreamCallError(Exception):
    """An upstream call failed; `sent` says whether the request may have reached the server."""

    def __init__(self, message: str, *, sent: bool, timeout: bool = False, answered: bool = False) -> None:
        super().__init__(message)
        self.sent = sent
        self.timeout = timeout
        self.answered = answered  # the server answered (a JSON-RPC error): it is up, the call failed


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self._inner:
            total += len(chunk)
            if total > self._limit:
                raise UpstreamResponseTooLarge(f"upstream response exceeds {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class OriginBoundTransport(httpx2.AsyncBaseTransport):
    """Sends the bearer credential only to `origin`; refuses every other origin; caps response bodies."""

    def __init__(
        self,
        origin: str,
        credential: str | None,
        *,
        max_response_bytes: int,
        inner: httpx2.AsyncBaseTransport | None = None,
        trust_env: bool = False,
    ) -> None:
        self.origin = origin
        self._credential = credential
        self._max = max_response_bytes
        # TCP_NODELAY: the request goes out as headers then body; with Nagle and the peer's delayed ACK
        # every call would stall ~40 ms (measured here).
        self._inner = inner or httpx2.AsyncHTTPTransport(
            trust_env=trust_env, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if origin_of(str(request.url)) != self.origin:
            raise CrossOriginRefused(
                f"refused to send a request to {origin_of(str(request.url))}: "
                f"this credential belongs to {self.origin}",
                request=request,
            )
        if self._credential is not None:
            request.headers["Authorization"] = f"Bearer {self._credential}"
        response = await self._inner.handle_async_request(request)
        length = response.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._max:
            await response.aclose()
            raise UpstreamResponseTooLarge(
                f"upstream response of {length} bytes exceeds {self._max}", request=request
            )
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self._max),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def make_http_client(
    url: str, credential: str | None, *, max_response_bytes: int = ROUTER_UPSTREAM_RESPONSE_MAX_BYTES
) -> httpx2.AsyncClient:
    """An httpx2 client for the MCP SDK whose every request is bound to `url`'s origin."""
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT

    origin = origin_of(url)
    loopback = _is_loopback_origin(origin)
    transport = OriginBoundTransport(
        origin, credential, max_response_bytes=max_response_bytes, trust_env=not loopback
    )
    return httpx2.AsyncClient(
        transport=transport,
        timeout=httpx2.Timeout(CONNECT_TIMEOUT_SECONDS, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        follow_redirects=False,
        trust_env=not loopback,
    )


def _is_loopback_origin(origin: str) -> bool:
    from ivoai.common.net import is_loopback_host

    return is_loopback_host(urlsplit(origin).hostname or "")


class UpstreamConnection:
    """One upstream MCP endpoint with its credential, as a long-lived initialized session."""

    def __init__(
        self,
        url: str,
        credential: str | None,
        *,
        name: str = "",
        max_response_bytes: int = ROUTER_UPSTREAM_RESPONSE_MAX_BYTES,
    ) -> None:
        self.url = url
        self.name = name or url
        self._credential = credential
        self._max = max_response_bytes
        self._lock = anyio.Lock()
        self._session: ClientSession | None = None
        self._stop: anyio.Event | None = None
        self._tools: list[mcp_types.Tool] | None = None

    async def _own(self, *, task_status: TaskStatus[ClientSession]) -> None:
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        stop = anyio.Event()
        self._stop = stop
        started = False
        try:
            async with (
                make_http_client(self.url, self._credential, max_response_bytes=self._max) as http,
                streamable_http_client(self.url, http_client=http, max_sse_event_size=self._max) as (r, w),
                ClientSession(r, w) as session,
            ):
                with anyio.fail_after(CONNECT_TIMEOUT_SECONDS):
                    await session.initialize()
                started = True
                task_status.started(session)
                await stop.wait()
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:
            if not started:
                raise
            log.debug("upstream session %s ended: %s", self.name, type(exc).__name__)
        finally:
            if self._stop is stop:
                self._session = None
                self._stop = None

    async def session(self, tg: TaskGroup) -> ClientSession:
        """The open session, (re)connecting under a lock when there is none."""
        async with self._lock:
            if self._session is None:
                try:
                    self._session = await tg.start(self._own)
                except BaseException as exc:
                    if isinstance(exc, anyio.get_cancelled_exc_class()):
                        raise
                    raise UpstreamCallError(f"could not connect: {_describe(exc)}", sent=False) from None
            return self._session

    def reset(self) -> None:
        """Drop the current session (after a failure); the next call reconnects."""
        if self._stop is not None:
            self._stop.set()
        self._session = None
        self._stop = None

    async def list_tools(self, tg: TaskGroup, timeout: float) -> list[mcp_types.Tool]:
        """The upstream's tools (cached after the first success)."""
        if self._tools is not None:
            return self._tools
        try:
            with anyio.fail_after(timeout):
                session = await self.session(tg)
                result = await session.list_tools()
        except TimeoutError:
            self.reset()
            raise UpstreamCallError(f"no answer within {timeout:g}s", sent=True, timeout=True) from None
        except UpstreamCallError:
            raise
        except Exception as exc:  # noqa: BLE001 - any transport or protocol failure is one failed source
            self.reset()
            raise UpstreamCallError(_describe(exc), sent=True) from None
        self._tools = list(result.tools)
        return self._tools

    async def call_tool(
        self, tg: TaskGroup, name: str, arguments: dict[str, Any], timeout: float, *, idempotent: bool = False
    ) -> mcp_types.CallToolResult:
        """Call one tool within `timeout` seconds.

        With `idempotent` (reads only), a failure on a session opened earlier (the server restarted, the
        session expired) is retried once on a fresh session within the same time budget. Writes are
        never retried.

        Raises:
            UpstreamCallError: with `sent=False` only when the request certainly never left.
        """
        deadline = anyio.current_time() + timeout
        reused = self._session is not None
        try:
            return await self._call_once(tg, name, arguments, timeout)
        except UpstreamCallError as exc:
            remaining = deadline - anyio.current_time()
            if not (idempotent and reused and not exc.answered and not exc.timeout and remaining > 0):
                raise
            log.debug("retrying %s on %s with a fresh session: %s", name, self.name, exc)
            return await self._call_once(tg, name, arguments, remaining)

    async def _call_once(
        self, tg: TaskGroup, name: str, arguments: dict[str, Any], timeout: float
    ) -> mcp_types.CallToolResult:
        from mcp.shared.exceptions import MCPError

        connected = False
        try:
            with anyio.fail_after(timeout):
                session = await self.session(tg)
                connected = True
                return await session.call_tool(name, arguments, read_timeout_seconds=timeout)
        except TimeoutError:
            self.reset()
            raise UpstreamCallError(f"no answer within {timeout:g}s", sent=connected, timeout=True) from None
        except UpstreamCallError:
            raise
        except MCPError as exc:
            if exc.code not in _SERVER_REFUSALS:
                # The transport synthesizes errors too (connection closed, HTTP error status, lost session):
                # those are failures of the source, and for a write the outcome is uncertain.
                self.reset()
                raise UpstreamCallError(f"upstream error {exc.code}: {exc.message}", sent=True) from None
            # The server parsed the request and refused it: an answer, the server is up.
            raise UpstreamCallError(
                f"upstream error {exc.code}: {exc.message}", sent=True, answered=True
            ) from None
        except Exception as exc:  # noqa: BLE001 - any transport or protocol failure is one failed source
            self.reset()
            raise UpstreamCallError(_describe(exc), sent=connected) from None

    async def aclose(self) -> None:
        self.reset()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions[0] if exc.exceptions else exc
        return _describe(inner)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


@contextlib.asynccontextmanager
async def open_session(
    url: str, credential: str | None, max_response_bytes: int = ROUTER_UPSTREAM_RESPONSE_MAX_BYTES
) -> AsyncIterator[ClientSession]:
    """A one-off initialized MCP session to `url` (used by probes)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        make_http_client(url, credential, max_response_bytes=max_response_bytes) as http,
        streamable_http_client(url, http_client=http, max_sse_event_size=max_response_bytes) as (r, w),
        ClientSession(r, w) as session,
    ):
        await session.initialize()
        yield session
