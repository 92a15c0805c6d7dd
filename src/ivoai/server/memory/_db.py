"""The memory database file: `common.sqlite` with memory's pragmas, names for its errors, its file name."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from ivoai.common import sqlite
from ivoai.common.limits import MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS
from ivoai.server.memory.errors import MemoryBusyError, MemoryClosedError, MemoryStoreError

DB_NAME = "memory.sqlite3"

P = ParamSpec("P")
R = TypeVar("R")


def _busy() -> MemoryBusyError:
    # The constant is read when the error is raised (a test shortens it for one service).
    return MemoryBusyError(
        f"memory database stayed locked for {MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS:g}s; retry"
    )


ERRORS = sqlite.ErrorNames(busy=_busy, failed=lambda text: MemoryStoreError(f"memory database error: {text}"))


def guard(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn SQLite failures into memory errors with stable codes (no tracebacks for users)."""
    return ERRORS.guard(fn)


def prepare_file(root: Path, directory: Path) -> Path:
    """Create (0600) or verify the database file below the private `directory`; return its path.

    Raises:
        UnsafePathError: the directory or file is a symlink, foreign-owned or has a loose mode.
    """
    return sqlite.prepare_file(root, directory / DB_NAME)


class Connections(sqlite.ConnectionPool):
    """One connection per thread to the memory database: WAL on every connection, foreign keys on.

    Errors stay `sqlite3` errors here: the service's `guard` names them (and `MemoryService.open`
    reports an unusable file as such). `close()` is final: later use raises MemoryClosedError.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(
            path,
            sqlite.Pragmas(busy_timeout_seconds=MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS, foreign_keys=True),
            wal_refused=lambda mode: MemoryStoreError(
                f"memory database could not switch to WAL (journal_mode={mode})"
            ),
            closed=lambda: MemoryClosedError("memory service is closed"),
        )

    def get(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use (`ConnectionPool.connection`).

        Raises:
            MemoryClosedError: after `close()`.
        """
        return self.connection()
