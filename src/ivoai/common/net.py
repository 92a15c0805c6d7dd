"""Network facts shared by client and server."""

from __future__ import annotations

import ipaddress


def is_loopback_host(host: str) -> bool:
    """True for `localhost` and any loopback IP literal (127.0.0.0/8, ::1, bracketed or not)."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
