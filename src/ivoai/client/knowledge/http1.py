"""The router's upstream transport: `common/httpclient`'s lean HTTP/1.1 transport with the router's limits.

It serves `_McpHttpSession` (JSON-RPC POSTs and the session's DELETE); `OriginBoundTransport` around
it binds the origin, adds the credential and caps the body. Why a lean transport rather than
httpx2's own, and what it guarantees (one origin, framing by h11 with ambiguous framing refused, head
cap, keep-alive rules, httpx2's exception types): `ivoai/common/httpclient/_async.py` and `_h11.py`.

TLS is `httpx2.create_ssl_context()`: the certificate chain and host name are verified exactly as
httpx2 verifies them (the environment's `SSL_CERT_FILE`/`SSL_CERT_DIR` only with `trust_env`).
"""

from __future__ import annotations

import functools
from typing import Any

import httpx2

from ivoai.common.httpclient import AsyncHttp11Transport
from ivoai.common.limits import (
    ROUTER_UPSTREAM_HEAD_MAX_BYTES,
    ROUTER_UPSTREAM_IDLE_CONNECTIONS,
    ROUTER_UPSTREAM_KEEPALIVE_SECONDS,
)

KEEPALIVE_EXPIRY_SECONDS = ROUTER_UPSTREAM_KEEPALIVE_SECONDS
KEEPALIVE_MAX_CONNECTIONS = ROUTER_UPSTREAM_IDLE_CONNECTIONS
RESPONSE_HEAD_MAX_BYTES = ROUTER_UPSTREAM_HEAD_MAX_BYTES


class Http11Transport(AsyncHttp11Transport):
    """HTTP/1.1 to one upstream origin, with the router's head cap and keep-alive limits."""

    def __init__(self, origin_url: str, *, trust_env: bool = False) -> None:
        super().__init__(
            origin_url,
            ssl_context=functools.partial(httpx2.create_ssl_context, trust_env=trust_env),
            head_max_bytes=RESPONSE_HEAD_MAX_BYTES,
            keepalive_seconds=KEEPALIVE_EXPIRY_SECONDS,
            idle_connections=KEEPALIVE_MAX_CONNECTIONS,
        )


def connection_count(transport: Any) -> int:
    """Idle kept-alive connections of an `Http11Transport` (tests and diagnostics)."""
    return len(transport.idle) if isinstance(transport, AsyncHttp11Transport) else 0
