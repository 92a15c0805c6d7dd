"""Upstream MCP clients: one per (server profile, service), each credential bound to its own origin.

Every request goes through an httpx2 transport that (1) refuses any request whose origin is not the
profile's origin, so a credential can never leave for another host even if a redirect or a bug asked
for it, (2) adds the `Authorization` header itself, so the header is not a client default that could
be copied anywhere, and (3) caps every response body at the router's upstream limit (16 MiB),
counting bytes as they arrive. Redirects are followed only within the endpoint's origin.

The router's calls use `_McpHttpSession`, a lean MCP Streamable HTTP client session (see its
docstring for why it is not the SDK's `ClientSession`) on `http1.Http11Transport`, a lean HTTP/1.1
transport (see its module doc for why it is not httpx2's); one initialized session per connection is
kept open with its kept-alive HTTP connections and replaced after any failure. `open_session` (probes,
the CLI's own calls to the router, tests) is the MCP SDK client.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import httpx2

from ivoai.client.knowledge.profiles import origin_of
from ivoai.common.httpclient import CappedAsyncStream, ResponseTooLarge, check_declared_length
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


# An upstream response body over the router's cap (16 MiB): the common capped-body error, by its old name.
UpstreamResponseTooLarge = ResponseTooLarge


class UpstreamCallError(Exception):
    """An upstream call failed; `sent` says whether the request may have reached the server."""

    def __init__(self, message: str, *, sent: bool, timeout: bool = False, answered: bool = False) -> None:
        super().__init__(message)
        self.sent = sent
        self.timeout = timeout
        self.answered = answered  # the server answered (a JSON-RPC error): it is up, the call failed


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
        try:
            check_declared_length(response, self._max)
        except ResponseTooLarge:
            await response.aclose()
            raise
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = CappedAsyncStream(response.stream, self._max)  # the same response, its body capped
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def make_transport(
    url: str,
    credential: str | None,
    *,
    max_response_bytes: int = ROUTER_UPSTREAM_RESPONSE_MAX_BYTES,
    lean: bool = False,
) -> OriginBoundTransport:
    """The origin-bound, capped transport for `url` (environment settings only for non-loopback).

    `lean`: HTTP/1.1 on asyncio streams (`http1.Http11Transport`) instead of httpx2's transport, for
    the router's own sessions; the SDK client (probes, `open_session`) keeps httpx2's.
    """
    origin = origin_of(url)
    trust_env = not _is_loopback_origin(origin)
    inner: httpx2.AsyncBaseTransport | None = None
    if lean:
        from ivoai.client.knowledge.http1 import Http11Transport

        inner = Http11Transport(url, trust_env=trust_env)
    return OriginBoundTransport(
        origin, credential, max_response_bytes=max_response_bytes, inner=inner, trust_env=trust_env
    )


def _timeouts() -> httpx2.Timeout:
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT

    return httpx2.Timeout(CONNECT_TIMEOUT_SECONDS, read=MCP_DEFAULT_SSE_READ_TIMEOUT)


def make_http_client(
    url: str, credential: str | None, *, max_response_bytes: int = ROUTER_UPSTREAM_RESPONSE_MAX_BYTES
) -> httpx2.AsyncClient:
    """An httpx2 client for the MCP SDK whose every request is bound to `url`'s origin."""
    return httpx2.AsyncClient(
        transport=make_transport(url, credential, max_response_bytes=max_response_bytes),
        timeout=_timeouts(),
        follow_redirects=False,
        trust_env=not _is_loopback_origin(origin_of(url)),
    )


def _is_loopback_origin(origin: str) -> bool:
    from ivoai.common.net import is_loopback_host

    return is_loopback_host(urlsplit(origin).hostname or "")


class _McpHttpSession:
    """One initialized MCP session over Streamable HTTP: JSON-RPC POSTs on kept-alive connections.

    The router's hot path. It speaks the same wire as the SDK client (`initialize` handshake at the
    SDK's `LATEST_HANDSHAKE_VERSION`, `notifications/initialized`, `MCP-Protocol-Version` and
    `Mcp-Session-Id` headers, JSON or SSE answers, 307/308 redirects followed only within the origin),
    straight on the origin-bound transport, and hands results back as the parsed JSON dicts the router
    merges and forwards. The SDK client would build pydantic models from every result, re-validate
    structured content against the tool's output schema with jsonschema, and then the router would dump
    them back to dicts: ~1.3 ms of CPU per upstream call here, three per federated read. Results still get
    a structural check (`_check_call_result`), and what the router returns is validated as a
    `CallToolResult` before it is sent.
    """

    def __init__(self, url: str, transport: httpx2.AsyncBaseTransport) -> None:
        self.url = httpx2.URL(url)
        self.transport = transport
        self._timeout = _timeouts().as_dict()
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.users = 0
        self.retired = False
        self._next_id = 0

    def _headers(self) -> dict[str, str]:
        headers = {"accept": _ACCEPT, "content-type": "application/json"}
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    async def initialize(self) -> None:
        """The handshake: `initialize`, check the version, `notifications/initialized`."""
        from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

        params = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "ivoai-knowledge-router", "version": "1"},
        }
        result = await self.request("initialize", params)
        version = result.get("protocolVersion")
        if version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise UpstreamProtocolError(f"unsupported protocol version from the server: {version!r}")
        self.protocol_version = str(version)
        await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, None)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one JSON-RPC request; its `result` object.

        Raises:
            MCPError: the server answered with a JSON-RPC error, or the transport failed the way the
                SDK's transport reports it (HTTP error status, lost session, 202 for a request).
            UpstreamProtocolError: the answer is not a JSON-RPC response to this request.
        """
        self._next_id += 1
        request_id = self._next_id
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        answer = await self._post(message, request_id)
        assert answer is not None
        return answer

    async def _send(self, method: str, headers: dict[str, str], body: bytes = b"") -> httpx2.Response:
        """One HTTP exchange straight on the transport (the httpx2 client's layers cost ~0.4 ms a call
        and add nothing here), following 307/308 redirects that stay on the same origin, like the SDK.
        """
        url = self.url
        for _ in range(_MAX_REDIRECTS + 1):
            request = httpx2.Request(
                method, url, headers=headers, content=body, extensions={"timeout": self._timeout}
            )
            response = await self.transport.handle_async_request(request)
            response.request = request
            location = response.headers.get("location")
            if response.status_code not in (307, 308) or not location:
                return response
            target = url.join(location)
            same_origin = (target.scheme, target.host, target.port) == (url.scheme, url.host, url.port)
            if not same_origin or target.userinfo:
                return response  # not followed: the caller reports the redirect
            await response.aclose()
            url = target
        return response

    async def _post(self, message: dict[str, Any], request_id: int | None) -> dict[str, Any] | None:
        from mcp.shared.exceptions import MCPError
        from mcp.types import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND

        body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
        r = await self._send("POST", self._headers(), body)
        async with contextlib.aclosing(r):
            if request_id is None:  # a notification: no answer expected
                await r.aread()
                if r.status_code >= 400:
                    method = message["method"]
                    raise MCPError(INTERNAL_ERROR, f"server refused {method}: HTTP {r.status_code}")
                return None
            content_type = r.headers.get("content-type", "").lower()
            if r.status_code == 202:
                raise MCPError(INVALID_REQUEST, "server answered a request with 202 Accepted")
            if 300 <= r.status_code < 400:
                raise MCPError(INVALID_REQUEST, f"redirect not followed (HTTP {r.status_code})")
            if r.status_code >= 400:
                if content_type.startswith("application/json"):
                    with contextlib.suppress(ValueError, httpx2.StreamError):
                        error = _json_rpc_error(json.loads(await r.aread()))
                        if error is not None:
                            raise error
                if r.status_code == 404:
                    if self.session_id is None:
                        raise MCPError(METHOD_NOT_FOUND, "Not Found")
                    raise MCPError(INVALID_REQUEST, "Session terminated")
                raise MCPError(INTERNAL_ERROR, f"Server returned an error response (HTTP {r.status_code})")
            if message.get("method") == "initialize":
                self.session_id = r.headers.get("mcp-session-id") or None
            if content_type.startswith("application/json"):
                return _response_result(json.loads(await r.aread()), request_id)
            if content_type.startswith("text/event-stream"):
                async for event in httpx2.EventSource(r, max_event_size=None):
                    if event.event != "message" or not event.data:
                        continue
                    parsed = json.loads(event.data)
                    if isinstance(parsed, dict) and "method" not in parsed and parsed.get("id") == request_id:
                        return _response_result(parsed, request_id)
                    # Notifications (progress, logs) and server-to-client requests: not used by the router.
                raise UpstreamProtocolError("the event stream ended without the response")
            raise MCPError(INVALID_REQUEST, f"Unexpected content type: {content_type}")

    async def aclose(self) -> None:
        """End the session on the server when it has one (best effort), then close the connections."""
        try:
            if self.session_id:
                with anyio.move_on_after(CONNECT_TIMEOUT_SECONDS), contextlib.suppress(Exception):
                    response = await self._send("DELETE", self._headers())
                    await response.aclose()
        finally:
            await self.transport.aclose()


_ACCEPT = "application/json, text/event-stream"
_MAX_REDIRECTS = 5


class UpstreamProtocolError(Exception):
    """An upstream answer that is not a conformant MCP/JSON-RPC response."""


def _json_rpc_error(parsed: Any) -> Exception | None:
    from mcp.shared.exceptions import MCPError

    if isinstance(parsed, dict) and isinstance(error := parsed.get("error"), dict):
        code, text = error.get("code"), error.get("message")
        if isinstance(code, int) and isinstance(text, str):
            return MCPError(code, text, error.get("data"))
    return None


def _response_result(parsed: Any, request_id: int) -> dict[str, Any]:
    error = _json_rpc_error(parsed)
    if error is not None:
        raise error
    if not isinstance(parsed, dict) or parsed.get("jsonrpc") != "2.0" or parsed.get("id") != request_id:
        raise UpstreamProtocolError("the answer is not the JSON-RPC response to this request")
    result = parsed.get("result")
    if not isinstance(result, dict):
        raise UpstreamProtocolError("the JSON-RPC response has no result object")
    return result


def _check_call_result(result: dict[str, Any]) -> dict[str, Any]:
    """The shape the merge relies on: a content list of typed blocks, optional structured object/flag."""
    content = result.get("content", [])
    if not isinstance(content, list) or not all(
        isinstance(block, dict) and isinstance(block.get("type"), str) for block in content
    ):
        raise UpstreamProtocolError("the tool result's content is not a list of content blocks")
    if not isinstance(result.get("structuredContent") or {}, dict):
        raise UpstreamProtocolError("the tool result's structuredContent is not an object")
    if not isinstance(result.get("isError") or False, bool):
        raise UpstreamProtocolError("the tool result's isError is not a boolean")
    return result


class UpstreamConnection:
    """One upstream MCP endpoint with its credential, as a long-lived initialized session.

    The session (and its HTTP client with kept-alive, TCP_NODELAY connections) is opened on first
    use and replaced after any failure; a replaced session is closed once its in-flight calls end.
    """

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
        self._session: _McpHttpSession | None = None
        self._tools: list[mcp_types.Tool] | None = None

    @property
    def connected(self) -> bool:
        """Whether an initialized session is open."""
        return self._session is not None

    async def _acquire(self) -> _McpHttpSession:
        """The open session, (re)connecting under a lock when there is none; counts the caller in."""
        session = self._session
        if session is not None:  # the common case: no lock, so no scheduling point (event-loop round)
            session.users += 1
            return session
        async with self._lock:
            if self._session is None:
                transport = make_transport(
                    self.url, self._credential, max_response_bytes=self._max, lean=True
                )
                session = _McpHttpSession(self.url, transport)
                try:
                    with anyio.fail_after(CONNECT_TIMEOUT_SECONDS):
                        await session.initialize()
                except BaseException as exc:
                    with anyio.CancelScope(shield=True):
                        await session.transport.aclose()
                    if isinstance(exc, anyio.get_cancelled_exc_class()):
                        raise
                    raise UpstreamCallError(f"could not connect: {_describe(exc)}", sent=False) from None
                self._session = session
            self._session.users += 1
            return self._session

    async def _release(self, session: _McpHttpSession, *, failed: bool) -> None:
        session.users -= 1
        if failed and self._session is session:
            self._session = None
            session.retired = True
        if session.retired and session.users == 0:
            with anyio.CancelScope(shield=True):
                await session.aclose()

    async def reset(self) -> None:
        """Drop the current session; the next call reconnects. It is closed now, or when its calls end."""
        session, self._session = self._session, None
        if session is not None:
            session.retired = True
            if session.users == 0:
                with anyio.CancelScope(shield=True):
                    await session.aclose()

    async def _request(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One request within `timeout`; its result object.

        A failure replaces the session; a cancellation by the caller (another replica answered first,
        the caller's deadline) does not: httpx2 drops the interrupted HTTP connection, the session stays.

        Raises:
            UpstreamCallError: with `sent=False` only when the request certainly never left.
        """
        from mcp.shared.exceptions import MCPError

        session: _McpHttpSession | None = None
        failed = False
        try:
            with anyio.fail_after(timeout):
                session = await self._acquire()
                return await session.request(method, params)
        except TimeoutError:
            failed = True
            raise UpstreamCallError(
                f"no answer within {timeout:g}s", sent=session is not None, timeout=True
            ) from None
        except UpstreamCallError:
            raise
        except MCPError as exc:
            if exc.code not in _SERVER_REFUSALS:
                # The transport reports failures as JSON-RPC errors too (HTTP error status, lost session):
                # those are failures of the source, and for a write the outcome is uncertain.
                failed = True
                raise UpstreamCallError(f"upstream error {exc.code}: {exc.message}", sent=True) from None
            # The server parsed the request and refused it: an answer, the server is up.
            raise UpstreamCallError(
                f"upstream error {exc.code}: {exc.message}", sent=True, answered=True
            ) from None
        except Exception as exc:  # noqa: BLE001 - any transport or protocol failure is one failed source
            failed = True
            raise UpstreamCallError(_describe(exc), sent=session is not None) from None
        finally:
            if session is not None:
                await self._release(session, failed=failed)

    async def list_tools(self, timeout: float) -> list[mcp_types.Tool]:
        """The upstream's tools (cached after the first success)."""
        if self._tools is not None:
            return self._tools
        import mcp.types as t

        raw = await self._request("tools/list", {}, timeout)
        try:
            tools = t.ListToolsResult.model_validate(raw, by_name=False).tools
        except ValueError as exc:
            await self.reset()
            raise UpstreamCallError(f"malformed tools/list result: {_describe(exc)}", sent=True) from None
        self._tools = list(tools)
        return self._tools

    async def call_tool(
        self, name: str, arguments: dict[str, Any], timeout: float, *, idempotent: bool = False
    ) -> dict[str, Any]:
        """Call one tool within `timeout` seconds; the `CallToolResult` as JSON (checked for shape).

        With `idempotent` (reads only), a failure on a session opened earlier (the server restarted, the
        session expired) is retried once on a fresh session within the same time budget. Writes are
        never retried.

        Raises:
            UpstreamCallError: with `sent=False` only when the request certainly never left.
        """
        deadline = anyio.current_time() + timeout
        params = {"name": name, "arguments": arguments}
        reused = self._session is not None
        try:
            result = await self._request("tools/call", params, timeout)
        except UpstreamCallError as exc:
            remaining = deadline - anyio.current_time()
            if not (idempotent and reused and not exc.answered and not exc.timeout and remaining > 0):
                raise
            log.debug("retrying %s on %s with a fresh session: %s", name, self.name, exc)
            result = await self._request("tools/call", params, remaining)
        try:
            return _check_call_result(result)
        except UpstreamProtocolError as exc:
            raise UpstreamCallError(f"malformed result: {exc}", sent=True) from None

    async def aclose(self) -> None:
        """Close the open session, if any."""
        await self.reset()


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
