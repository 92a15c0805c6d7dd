"""Redirect URI policy for dynamic client registration and authorization (pure functions).

Registration accepts only:
- `https://host/...` without userinfo or fragment;
- `http://` on a loopback host (127.0.0.1, [::1], localhost) without userinfo or fragment (RFC 8252
  §7.3 native apps; the "explicitly supported loopback development case").
Everything else (`javascript:`, `data:`, custom schemes, plain http elsewhere) is refused.

At authorization the requested URI must equal a registered one exactly (string comparison: a
changed path, a trailing slash, an added query all fail), except that for a loopback registration
the port may differ (RFC 8252 §7.3: the native app picks an ephemeral port at run time).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ivoai.common.limits import OAUTH_MAX_REDIRECT_URIS

LOOPBACK_REDIRECT_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def redirect_problem(uri: str) -> str | None:
    """Why `uri` may not be registered, or None when it may."""
    if len(uri) > 2048:
        return "redirect URI is longer than 2048 characters"
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
    if parts.scheme == "http" and parts.hostname.lower() not in LOOPBACK_REDIRECT_HOSTS:
        return "plain http redirect URIs are allowed only on loopback (127.0.0.1, [::1], localhost)"
    return None


def registration_problem(uris: list[str]) -> str | None:
    """Why a registration's redirect URI list is refused, or None."""
    if not uris:
        return "at least one redirect URI is required"
    if len(uris) > OAUTH_MAX_REDIRECT_URIS:
        return f"at most {OAUTH_MAX_REDIRECT_URIS} redirect URIs may be registered"
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
