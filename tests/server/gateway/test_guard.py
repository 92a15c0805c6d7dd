"""Transport policy: plaintext only on loopback or from a trusted TLS-terminating proxy."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from ivoai.common.errors import ValidationError
from ivoai.server.config import load_config
from ivoai.server.datadir import ServerDataDir
from ivoai.server.gateway.guard import GatewayGuard
from ivoai.server.gateway.settings import GatewaySettings, normalize_public_url, parse_listen
from ivoai.server.runtime.lifecycle import StartOptions, effective_settings

pytestmark = pytest.mark.anyio

PROXY = GatewaySettings(
    listen_host="0.0.0.0",
    listen_port=7744,
    public_url="https://ai.example.com",
    trusted_proxies=(ipaddress.ip_network("10.0.0.0/8"),),
)


async def _hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hi")


def _client(peer: str) -> httpx2.AsyncClient:
    app = GatewayGuard(Starlette(routes=[Route("/", _hello)]), PROXY)
    return httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app, client=(peer, 4242)), base_url="https://ai.example.com"
    )


@pytest.mark.parametrize(
    ("peer", "proto", "status"),
    [
        ("10.1.2.3", "https", 200),  # trusted proxy forwarding HTTPS
        ("10.1.2.3", None, 403),  # trusted proxy without X-Forwarded-Proto
        ("10.1.2.3", "http", 403),  # trusted proxy forwarding plaintext
        ("192.168.1.9", "https", 403),  # untrusted peer claiming HTTPS
        ("127.0.0.1", None, 200),  # local health check on the host
    ],
)
async def test_plaintext_listener_accepts_only_trusted_proxies_forwarding_https(
    peer: str, proto: str | None, status: int
) -> None:
    headers = {"X-Forwarded-Proto": proto} if proto else {}
    async with _client(peer) as http:
        response = await http.get("/", headers=headers)
    assert response.status_code == status


def test_non_loopback_plaintext_without_proxy_or_tls_is_refused() -> None:
    with pytest.raises(ValidationError, match="refusing plaintext HTTP on non-loopback address 0.0.0.0"):
        GatewaySettings(listen_host="0.0.0.0").validate()
    GatewaySettings(
        listen_host="0.0.0.0", public_url="https://ai.example.com", tls_cert=Path("c"), tls_key=Path("k")
    ).validate()


def test_half_a_tls_pair_is_refused(tmp_path: Path) -> None:
    data = ServerDataDir(tmp_path / "srv").ensure()
    with pytest.raises(ValidationError, match="--tls-cert and --tls-key must be given together"):
        effective_settings(load_config(data).gateway, StartOptions(tls_cert=tmp_path / "cert.pem"))


@pytest.mark.parametrize(
    "value", ["http://ai.example.com", "https://ai.example.com/path", "ftp://x", "https://u@h"]
)
def test_public_url_must_be_a_bare_https_origin(value: str) -> None:
    with pytest.raises(ValidationError, match="--public-url"):
        normalize_public_url(value)


def test_public_url_is_canonicalized() -> None:
    assert normalize_public_url("HTTPS://AI.Example.com:443/") == "https://ai.example.com"
    assert parse_listen("[::1]:7744") == ("::1", 7744)
