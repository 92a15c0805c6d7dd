"""The outermost ASGI layer: transport policy, Host/Origin validation, body bound, read timeout, headers.

- **Transport policy.** On a non-loopback plaintext listener (allowed only with trusted proxies),
  a request must come from a peer inside a trusted CIDR and carry `X-Forwarded-Proto: https`, or
  from loopback; anything else gets 403 before routing.
- **DNS rebinding.** `Host` must name this server (its public origin, or the loopback listener);
  otherwise 421. A browser `Origin`, when present, must be the public origin or an explicitly
  allowed one; otherwise 403. The OAuth token/registration/revocation endpoints and the metadata
  documents are CORS endpoints by design and skip the Origin check (they carry no ambient cookies).
- **Bounds.** Bodies over 4 MiB get 413 in the one JSON error shape (a declared length is refused
  before reading, a streamed body is counted; the body is read whole before any handler runs); a
  body that stalls longer than `HTTP_READ_TIMEOUT_SECONDS` between chunks ends the request, and a
  response chunk a client does not read within `HTTP_WRITE_TIMEOUT_SECONDS` ends it too.
- **Headers.** Every response, the guard's own refusals included, gets `Cache-Control: no-store`
  (replacing any handler value), `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`.
  (The listener adds nosniff to the server's own answers too: `http11.py`.)
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ivoai.common.errors import TooLargeError
from ivoai.common.limits import HTTP_BODY_MAX_BYTES, HTTP_READ_TIMEOUT_SECONDS, HTTP_WRITE_TIMEOUT_SECONDS
from ivoai.common.net import is_loopback_host
from ivoai.server.gateway.bodies import read_body
from ivoai.server.gateway.errors import HttpRefusal, error_response
from ivoai.server.gateway.settings import GatewaySettings, IpNetwork

CORS_PATHS = frozenset({"/token", "/register", "/revoke"})
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def _origin_of(url: str) -> tuple[str, str]:
    scheme, _, rest = url.partition("://")
    return scheme, rest.split("/")[0].lower()


class GatewayGuard:
    """See module doc."""

    def __init__(
        self,
        app: ASGIApp,
        settings: GatewaySettings,
        *,
        extra_hosts: Iterable[str] = (),
    ) -> None:
        self.settings = settings
        self.app = app
        _, public_host = _origin_of(settings.base_url)
        self.allowed_hosts = {public_host, *(h.lower() for h in extra_hosts)}
        self.loopback_listener = is_loopback_host(settings.listen_host)
        self.allowed_origins = {settings.base_url.lower(), *(o.lower() for o in settings.allowed_origins)}
        self.proxies: tuple[IpNetwork, ...] = settings.trusted_proxies
        self.enforce_proxy = not self.loopback_listener and not settings.tls

    def _host_ok(self, host: str) -> bool:
        host = host.lower()
        if host in self.allowed_hosts:
            return True
        if self.loopback_listener:
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            return name in LOOPBACK_HOSTS and host.endswith(f":{self.settings.listen_port}")
        return False

    def _peer_ok(self, scope: Scope, headers: dict[bytes, bytes]) -> bool:
        client = scope.get("client")
        if client is None:
            return True  # in-process transport (tests, ASGI embedding)
        try:
            peer = ipaddress.ip_address(client[0])
        except ValueError:
            return False
        if peer.is_loopback:
            return True
        proto = headers.get(b"x-forwarded-proto", b"").decode("latin-1").lower()
        return any(peer in net for net in self.proxies) and proto == "https"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_headers(send)  # every answer, the guard's own refusals included
        refusal = self._refusal(scope)
        if refusal is not None:
            await error_response(refusal)(scope, receive, send)
            return
        receive = _timed(receive)
        try:
            declared = dict(scope.get("headers", [])).get(b"content-length", b"")
            if declared.isdigit() and int(declared) > HTTP_BODY_MAX_BYTES:
                raise TooLargeError(f"request body exceeds {HTTP_BODY_MAX_BYTES} bytes")
            body = await read_body(receive, HTTP_BODY_MAX_BYTES)  # whole, before any handler runs
        except TooLargeError as exc:
            await error_response(exc)(scope, receive, send)
            return
        await self.app(scope, body.replay(receive), send)

    def _refusal(self, scope: Scope) -> HttpRefusal | None:
        """Why the request is refused before routing (transport policy, Host, Origin), or None."""
        headers = dict(scope.get("headers", []))
        if self.enforce_proxy and not self._peer_ok(scope, headers):
            return HttpRefusal(
                "plain HTTP is accepted only from a trusted TLS-terminating proxy (X-Forwarded-Proto: https)",
                code="plaintext_refused",
                status=403,
            )
        if not self._host_ok(headers.get(b"host", b"").decode("latin-1")):
            return HttpRefusal("Host is not this server", code="invalid_host", status=421)
        origin = headers.get(b"origin")
        path = scope.get("path", "")
        if (
            origin is not None
            and path not in CORS_PATHS
            and not path.startswith("/.well-known/")
            and origin.decode("latin-1").lower() not in self.allowed_origins
        ):
            return HttpRefusal("Origin is not allowed", code="invalid_origin", status=403)
        return None


def _timed(receive: Receive) -> Receive:
    """Bound each wait for the next body chunk; after the body is complete, wait freely (SSE disconnect)."""
    done = False

    async def wrapped() -> Message:
        nonlocal done
        if done:
            return await receive()
        with anyio.fail_after(HTTP_READ_TIMEOUT_SECONDS):
            message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            done = True
        return message

    return wrapped


SECURITY_HEADERS = ((b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"))


def _with_headers(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            raw = list(message.get("headers", []))
            names = {k.lower() for k, _ in raw}
            raw = [(k, v) for k, v in raw if k.lower() != b"cache-control"]
            raw.append((b"cache-control", b"no-store"))
            raw.extend(h for h in SECURITY_HEADERS if h[0] not in names)
            message = {**message, "headers": raw}
        # A client that stops reading blocks `send` (transport back-pressure): bound each write.
        with anyio.fail_after(HTTP_WRITE_TIMEOUT_SECONDS):
            await send(message)

    return wrapped
