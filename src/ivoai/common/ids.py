"""Random opaque identifiers and hashing helpers."""

from __future__ import annotations

import hashlib
import hmac
import secrets


def random_id(prefix: str, nbytes: int = 16) -> str:
    """An opaque random ID like `art_3f9c…`, never derived from input."""
    return f"{prefix}_{secrets.token_hex(nbytes)}"


def random_token(nbytes: int = 32) -> str:
    """A URL-safe secret from the OS CSPRNG (256 bits by default)."""
    return secrets.token_urlsafe(nbytes)


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def constant_time_equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))
