"""Server URL rules: HTTPS everywhere, plaintext only to loopback; no userinfo, query or fragment."""

from __future__ import annotations

from urllib.parse import urlsplit

from ivoai.common.errors import ValidationError
from ivoai.common.net import is_loopback_host

URL_MAX_CHARS = 2048


def normalize_server_url(url: str, *, field: str = "--url") -> str:
    """Validate a server URL and return it as `scheme://host[:port][/path]` without a trailing slash.

    Raises:
        ValidationError: bad scheme, plaintext to a non-loopback host, userinfo, query or fragment.
    """
    if len(url) > URL_MAX_CHARS:
        raise ValidationError(f"{field} is longer than {URL_MAX_CHARS} characters")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ValidationError(f"{field} {url!r} is not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in ("https", "http") or not host:
        raise ValidationError(
            f"{field} must be an https:// URL (http:// only for a loopback development server)"
        )
    if scheme == "http" and not is_loopback_host(host):
        raise ValidationError(
            f"{field} uses plaintext http to {host}; ivoai sends codes and credentials only over HTTPS "
            "(plaintext is accepted for loopback development servers only)"
        )
    if parts.username is not None or parts.password is not None:
        raise ValidationError(f"{field} must not contain user information (credentials never go in URLs)")
    if parts.query or parts.fragment:
        raise ValidationError(f"{field} must not contain a query or fragment")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        netloc += f":{port}"
    path = parts.path.rstrip("/")
    return f"{scheme}://{netloc}{path}"
