"""The one origin a lean transport serves, and what both transports keep about it."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass

import httpx2

READ_CHUNK_BYTES = 64 * 1024  # one read from a socket, not a limit


def default_port(scheme: str) -> int:
    """443 for https, 80 otherwise."""
    return 443 if scheme == "https" else 80


@dataclass(frozen=True)
class Origin:
    """Scheme, host and port of an `http` or `https` URL."""

    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url_text: str) -> Origin:
        """The origin of `url_text`.

        Raises:
            httpx2.InvalidURL: not a URL. httpx2.UnsupportedProtocol: not http(s), or no host.
        """
        url = httpx2.URL(url_text)
        if url.scheme not in ("http", "https") or not url.host:
            raise httpx2.UnsupportedProtocol(f"unsupported URL for the HTTP/1.1 transport: {url.scheme}://…")
        return cls(url.scheme, url.host, url.port or default_port(url.scheme))

    def check(self, request: httpx2.Request) -> None:
        """Refuse a request for any other origin.

        Raises:
            httpx2.LocalProtocolError: `request` is for another origin (nothing was sent).
        """
        url = request.url
        theirs = (url.scheme, url.host, url.port or default_port(url.scheme))
        if theirs != (self.scheme, self.host, self.port):
            raise httpx2.LocalProtocolError("this transport serves one origin only", request=request)


class Endpoint:
    """An origin, the TLS context to reach it (built once, on first use) and the answer-head cap."""

    def __init__(
        self, origin_url: str, ssl_context: Callable[[], ssl.SSLContext], head_max_bytes: int
    ) -> None:
        """Raises:
        httpx2.InvalidURL, httpx2.UnsupportedProtocol: `origin_url` is not an http(s) URL with a host.
        """
        self.origin = Origin.of(origin_url)
        self.head_max_bytes = head_max_bytes
        self._factory = ssl_context
        self._ssl: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    def tls(self) -> ssl.SSLContext | None:
        """The TLS context for an https origin (None for http); loading CA bundles costs tens of ms."""
        if self.origin.scheme != "https":
            return None
        with self._lock:
            if self._ssl is None:
                self._ssl = self._factory()
            return self._ssl
