"""The integer check every hand-written validator shares (import-light: the launch path uses it).

JSON and TOML booleans are Python ints (`True == 1`), so `isinstance(value, int)` alone would accept
`true` as a count, a TTL or a schema number. Each caller keeps its own error message (they name the
field and the limit); only the test is here.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing would cost the launch path
if TYPE_CHECKING:
    from typing import TypeGuard


def is_int(value: object, lo: int | None = None, hi: int | None = None) -> TypeGuard[int]:
    """True when `value` is an int and not a bool, and within `lo`..`hi` (inclusive) where given."""
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    return (lo is None or value >= lo) and (hi is None or value <= hi)
