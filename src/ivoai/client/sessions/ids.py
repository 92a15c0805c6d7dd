"""The session-ID format, written once (import-light: the launcher issues IDs before its client starts).

A session ID is `ses_` followed by 32 lowercase hex digits from `os.urandom`: random, opaque, never
derived from input. Anything else is refused before it is used to build a path or stored in an event.
"""

from __future__ import annotations

import os

from ivoai.client.sessions.errors import InvalidSessionIdError

SESSION_ID_PREFIX = "ses_"
_HEX = frozenset("0123456789abcdef")
_BODY_LENGTH = 32


def new_session_id() -> str:
    """A random opaque session ID (`ses_` + 32 hex digits), never derived from input."""
    return SESSION_ID_PREFIX + os.urandom(_BODY_LENGTH // 2).hex()


def is_session_id(value: object) -> bool:
    """True when `value` is a session ID ivoai could have issued."""
    if not isinstance(value, str) or not value.startswith(SESSION_ID_PREFIX):
        return False
    body = value[len(SESSION_ID_PREFIX) :]
    return len(body) == _BODY_LENGTH and set(body) <= _HEX


def check_session_id(session_id: str) -> str:
    """Return `session_id` if ivoai could have issued it.

    Raises:
        InvalidSessionIdError: anything else (it is never used to build a path).
    """
    if not is_session_id(session_id):
        raise InvalidSessionIdError(
            f"invalid session ID {session_id[:80]!r}: expected ses_ followed by 32 hex digits"
        )
    return session_id
