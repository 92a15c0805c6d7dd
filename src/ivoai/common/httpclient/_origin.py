"""The one origin a lean transport serves."""

from __future__ import annotations

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
