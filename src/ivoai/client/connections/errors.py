"""Errors of the connections package; each carries a stable code."""

from __future__ import annotations

from ivoai.common.errors import IvoaiError


class ConnectionsError(IvoaiError):
    """A connection could not be made or changed."""

    code = "connection_error"


class OfficialClientMissingError(ConnectionsError):
    """The official Codex or Claude client is not installed."""

    code = "official_client_missing"


class LoginError(ConnectionsError):
    """The official client is not logged in (ivoai never handles that credential itself)."""

    code = "not_logged_in"


class EnrollmentError(ConnectionsError):
    """Discovery, the pre-exchange checks, or the code exchange failed; no code was consumed unless said."""

    code = "enrollment_failed"


class InsecureServerError(EnrollmentError):
    """The server URL is not HTTPS and not loopback, or TLS validation failed."""

    code = "insecure_server"


class RedirectRefusedError(EnrollmentError):
    """The server redirected to another origin; ivoai never follows it with a code or credential."""

    code = "redirect_refused"
