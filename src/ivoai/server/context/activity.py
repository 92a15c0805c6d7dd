"""Foreground activity of one process, so that background embedding yields to searches.

Searches mark themselves (`with activity.search():`); a background worker calls `wait_idle()` before
each embedding batch and waits, passively (a condition variable, no spinning), until no search is
in flight, at most `max_wait` seconds so that a steady stream of searches cannot starve it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ForegroundActivity:
    """A counter of in-flight searches with a passive wait for zero (thread-safe)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0

    @contextmanager
    def search(self) -> Iterator[None]:
        """Mark one search in flight for the block."""
        with self._cond:
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                if self._active == 0:
                    self._cond.notify_all()

    @property
    def busy(self) -> bool:
        """Whether a search is in flight now."""
        with self._cond:
            return self._active > 0

    def wait_idle(self, max_wait: float) -> bool:
        """Wait until no search is in flight or `max_wait` seconds passed; True when idle."""
        with self._cond:
            return self._cond.wait_for(lambda: self._active == 0, timeout=max_wait)
