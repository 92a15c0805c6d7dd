"""Redirect URI policy for dynamic client registration and authorization (pure functions).

Registration accepts only:
- `https://host/...` without userinfo or fragment, where host is a DNS name (letters, digits and
  hyphens in dot-separated labels: `*.example.com` is a literal, never a wildcard, and refused) or an
  IP literal;
- `http://` on a loopback host (127.0.0.1, [::1], localhost) without userinfo or fragment (RFC 8252
  §7.3 native apps; the "explicitly supported loopback development case").
Everything else (`javascript:`, `data:`, custom schemes, plain http elsewhere) is refused.

At authorization the requested URI must equal a registered one exactly (string comparison: a
changed path, a trailing slash, an added query all fail), except that for a loopback registration
the port may differ (RFC 8252 §7.3: the native app picks an ephemeral port at run time).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from ivoai.common.limits import OAUTH_MAX_REDIRECT_URIS, OAUTH_REDIRECT_URI_MAX_CHARS

LOOPBACK_REDIRECT_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
_DNS_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def _host_ok(host: str) -> bool:
    """A DNS name of valid labels (no wildcard, no underscore, no empty label) or an IP literal."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    labels = host.split(".")
    return len(host) <= 253 and all(_DNS_LABEL.match(label) for label in labels)


def redirect_problem(uri: str) -> str | None:
    """Why `uri` may not be registered, or None when it may."""
    if len(uri) > OAUTH_REDIRECT_URI_MAX_CHARS:
        return f"redirect_uris: a URI is {len(uri)} characters; the limit is {OAUTH_REDIRECT_URI_MAX_CHARS}"
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return f"redirect URI {uri!r} is not a valid URL"
    del port
    if parts.scheme not in ("https", "http"):
        return f"redirect URI scheme {parts.scheme!r} is not allowed (https, or http on loopback)"
    if not parts.hostname:
        return "redirect URI has no host"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "redirect URI must not contain userinfo"
    if parts.fragment or "#" in uri:
        return "redirect URI must not contain a fragment"
    if not _host_ok(parts.hostname):
        return (
            f"redirect URI host {parts.hostname!r} is not a DNS name or IP address "
            "(wildcards such as *.example.com are not supported)"
        )
    if parts.scheme == "http" and parts.hostname.lower() not in LOOPBACK_REDIRECT_HOSTS:
        return "plain http redirect URIs are allowed only on loopback (127.0.0.1, [::1], localhost)"
    return None


def registration_problem(uris: list[str]) -> str | None:
    """Why a registration's redirect URI list is refused, or None."""
    if not uris:
        return "at least one redirect URI is required"
    if len(uris) > OAUTH_MAX_REDIRECT_URIS:
        return f"redirect_uris: {len(uris)} given; the limit is {OAUTH_MAX_REDIRECT_URIS}"
    for uri in uris:
        problem = redirect_problem(uri)
        if problem is not None:
            return problem
    return None


def _is_loopback_http(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and (parts.hostname or "").lower() in LOOPBACK_REDIRECT_HOSTS


def _without_port(uri: str) -> tuple[str, str, str, str]:
    parts = urlsplit(uri)
    return (parts.scheme, (parts.hostname or "").lower(), parts.path, parts.query)


def redirect_matches(registered: list[str], requested: str) -> bool:
    """True when `requested` is allowed for a client that registered `registered` (see module doc)."""
    if redirect_problem(requested) is not None:
        return False
    if requested in registered:
        return True
    if not _is_loopback_http(requested):
        return False
    try:
        want = _without_port(requested)
    except ValueError:
        return False
    return any(_is_loopback_http(r) and _without_port(r) == want for r in registered)
