"""The one parser of the HTTP `Authorization` header (RFC 9110 §11.6.2: `<scheme> <credentials>`).

Every authenticated route of the server (the bearer gate), OAuth client authentication
(`client_secret_basic`) and the client's knowledge router read the header through this module. The
scheme is case-insensitive; surrounding white space is ignored; an absent, empty or one-word value
carries no credentials.
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import unquote


def parse_authorization(value: str | bytes | None) -> tuple[str, str] | None:
    """(scheme in lower case, credentials) of a header value, or None when there are none."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    scheme, _, rest = text.strip().partition(" ")
    credentials = rest.strip()
    if not scheme or not credentials:
        return None
    return scheme.lower(), credentials


def bearer_token(value: str | bytes | None) -> str | None:
    """The token of `Bearer <token>`, or None for any other (or no) value."""
    parsed = parse_authorization(value)
    return parsed[1] if parsed is not None and parsed[0] == "bearer" else None


def basic_credentials(value: str | bytes | None) -> tuple[str, str] | None:
    """(user, password) of `Basic <base64>`, each percent-decoded (RFC 6749 §2.3.1), or None for any
    other (or no) value. A missing `:` means an empty password.

    Raises:
        ValueError: the scheme is Basic but the credentials are not base64 of UTF-8 text.
    """
    parsed = parse_authorization(value)
    if parsed is None or parsed[0] != "basic":
        return None
    try:
        decoded = base64.b64decode(parsed[1]).decode("utf-8")
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise ValueError("Basic credentials are not base64 of UTF-8 text") from None
    user, _, password = decoded.partition(":")
    return unquote(user), unquote(password)
