"""Gateway settings: the `[server]` table of `DATA/config.toml` (read by `server/config.py`),
overridable from `ivoai server start`.

The transport policy is decided here, once, before any socket is opened:

- a loopback listener may serve plaintext HTTP (development, the quickstart);
- a non-loopback plaintext listener is allowed only with `--trusted-proxy CIDR`, and then every
  request must come from a peer in that CIDR and carry `X-Forwarded-Proto: https`;
- any other non-loopback listener requires `--tls-cert` and `--tls-key`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from ivoai.common.errors import ValidationError
from ivoai.common.limits import (
    GATEWAY_DEFAULT_LISTEN,
    REINGEST_INTERVAL_DEFAULT_SECONDS,
    REINGEST_INTERVAL_MIN_SECONDS,
)
from ivoai.common.net import is_loopback_host

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def parse_listen(value: str, what: str = "--listen") -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:7744` for IPv6) -> (host, port); `what` names the source in errors.

    Raises:
        ValidationError: malformed address or port outside 0..65535.
    """
    text = value.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
        if not sep:
            raise ValidationError(f"{what}: unbalanced brackets in {value!r}")
    else:
        host, _, port_text = text.rpartition(":")
    if not host or not port_text.isdigit():
        raise ValidationError(
            f"{what}: expected HOST:PORT (for example {GATEWAY_DEFAULT_LISTEN}), got {value!r}"
        )
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValidationError(f"{what}: port must be 0..65535, got {port}")
    return host, port


def normalize_public_url(value: str, what: str = "--public-url") -> str:
    """A canonical origin `scheme://host[:port]` (lower-case, no path, query, fragment or userinfo).

    Raises:
        ValidationError: not an absolute http(s) origin.
    """
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(f"{what}: expected https://HOST[:PORT], got {value!r}")
    if parts.username or parts.password or parts.query or parts.fragment or parts.path not in ("", "/"):
        raise ValidationError(f"{what}: must be a bare origin without path, query or credentials: {value!r}")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ValidationError(f"{what}: plain http is allowed only for a loopback host; use https://")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default_port = 443 if parts.scheme == "https" else 80
    port = "" if parts.port in (None, default_port) else f":{parts.port}"
    return f"{parts.scheme}://{host}{port}"


@dataclass(frozen=True)
class GatewaySettings:
    """Everything the gateway needs to know about its network position."""

    listen_host: str = "127.0.0.1"
    listen_port: int = 7744
    public_url: str = ""  # empty: derived from the listen address
    trusted_proxies: tuple[IpNetwork, ...] = ()
    tls_cert: Path | None = None
    tls_key: Path | None = None
    reingest_interval_seconds: int = REINGEST_INTERVAL_DEFAULT_SECONDS
    allowed_origins: tuple[str, ...] = field(default_factory=tuple)

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def base_url(self) -> str:
        """The canonical public origin (configured, or derived from the listen address)."""
        if self.public_url:
            return self.public_url
        scheme = "https" if self.tls else "http"
        host = self.listen_host
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"{scheme}://{host}:{self.listen_port}"

    @property
    def mcp_resource_url(self) -> str:
        """The RFC 8707 resource every OAuth token is bound to: the canonical public `/mcp` URL."""
        return self.base_url + "/mcp"

    def with_port(self, port: int) -> GatewaySettings:
        """A copy listening on `port` (used after binding port 0)."""
        return replace(self, listen_port=port)

    def validate(self) -> None:
        """Refuse a transport configuration the seed forbids (see module doc).

        Raises:
            ValidationError: plaintext on a non-loopback listener without a trusted proxy, half a TLS
                pair, or an https public URL served by a plaintext loopback listener without a proxy.
        """
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValidationError("--tls-cert and --tls-key must be given together")
        loopback = is_loopback_host(self.listen_host)
        if not loopback and not self.tls and not self.trusted_proxies:
            raise ValidationError(
                f"refusing plaintext HTTP on non-loopback address {self.listen_host}: "
                "give --tls-cert/--tls-key, "
                "or put a TLS-terminating proxy in front and name it with --trusted-proxy CIDR"
            )
        if not loopback and not self.public_url:
            raise ValidationError(
                f"a non-loopback listener ({self.listen_host}) needs --public-url https://HOST: it is the "
                "canonical origin clients, OAuth tokens and Host checks are bound to"
            )
        if self.reingest_interval_seconds < REINGEST_INTERVAL_MIN_SECONDS:
            raise ValidationError(
                f"reingest_interval_seconds must be at least {REINGEST_INTERVAL_MIN_SECONDS}, "
                f"got {self.reingest_interval_seconds}"
            )


def parse_proxies(
    values: list[str] | tuple[str, ...], what: str = "--trusted-proxy"
) -> tuple[IpNetwork, ...]:
    """CIDR strings -> networks.

    Raises:
        ValidationError: a value is not a CIDR.
    """
    out: list[IpNetwork] = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValidationError(f"{what}: {value!r} is not an IP network like 10.0.0.0/8") from None
    return tuple(out)
