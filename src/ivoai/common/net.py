"""Network facts shared by client and server."""

from __future__ import annotations

import ipaddress

# The proxy settings a child that downloads or logs in must keep (a proxy URL may carry the proxy's
# own login; without them nothing reaches the network on such machines).
PROXY_ENV_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy")


def is_loopback_host(host: str) -> bool:
    """True for `localhost` and any loopback IP literal (127.0.0.0/8, ::1, bracketed or not)."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
