"""The SQLite file: private creation, per-thread connections, transactions, error mapping."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ParamSpec, TypeVar

from ivoai.common.errors import UnsafePathError
from ivoai.common.fsio import PRIVATE_FILE_MODE, check_stat, ensure_private_dir
from ivoai.common.limits import MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS
from ivoai.server.memory.errors import MemoryBusyError, MemoryClosedError, MemoryStoreError

DB_NAME = "memory.sqlite3"

P = ParamSpec("P")
R = TypeVar("R")


def guard(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn SQLite failures into memory errors with stable codes (no tracebacks for users)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise MemoryBusyError(
                    f"memory database stayed locked for {MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS:g}s; retry"
                ) from None
            raise MemoryStoreError(f"memory database error: {text}") from None
        except sqlite3.DatabaseError as exc:
            raise MemoryStoreError(f"memory database error: {exc}") from None

    return wrapper


def prepare_file(root: Path, directory: Path) -> Path:
    """Create (0600) or verify the database file below the private `directory`; return its path.

    Raises:
        UnsafePathError: the directory or file is a symlink, foreign-owned or has a loose mode.
    """
    ensure_private_dir(root, directory)
    path = directory / DB_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(f"{path} is a symlink; remove it") from None
        raise
    try:
        check_stat(os.fstat(fd), path, private=True, expect_dir=False)
    finally:
        os.close(fd)
    return path


class Connections:
    """One SQLite connection per thread (WAL, busy timeout), all closed together.

    Worker threads come and go (anyio retires a pool thread after 10 s idle): when a thread opens
    its connection, the connections of threads that have ended are closed, so a long-running
    server holds at most one connection per live thread instead of one per thread it ever had.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._all: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._lock = threading.Lock()
        self._closed = False

    def get(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use.

        Raises:
            MemoryClosedError: after `close()`.
        """
        if self._closed:
            raise MemoryClosedError("memory service is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            with self._lock:
                if self._closed:
                    conn.close()
                    raise MemoryClosedError("memory service is closed")
                ended = [c for t, c in self._all if not t.is_alive()]
                self._all = [(t, c) for t, c in self._all if t.is_alive()]
                self._all.append((threading.current_thread(), conn))
            for old in ended:  # their threads are gone, so nothing can be using them
                with contextlib.suppress(sqlite3.Error):
                    old.close()
            self._local.conn = conn
        return conn

    def open_count(self) -> int:
        """How many connections are open (one per live thread that has used the database)."""
        with self._lock:
            return len(self._all)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise MemoryStoreError(f"memory database could not switch to WAL (journal_mode={mode})")
            # NORMAL in WAL mode: a committed write survives a crash of the process; only a power
            # loss can roll back the last commits, never corrupt the file.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """An immediate (write-locked) transaction: committed on success, rolled back on error."""
        conn = self.get()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # also after a failed COMMIT: never leave a connection mid-transaction
                conn.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every statement in the block sees one snapshot."""
        conn = self.get()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")

    def close(self) -> None:
        """Close every thread's connection; later calls raise MemoryClosedError."""
        with self._lock:
            self._closed = True
            conns, self._all = [c for _, c in self._all], []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
