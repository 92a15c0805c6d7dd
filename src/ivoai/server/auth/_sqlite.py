"""A private SQLite file shared by independent processes: WAL, per-thread connections, locked writes.

The first use of a file (switching it to WAL, creating or checking its tables) runs under an
exclusive `flock` on a sibling `.lock` file, because SQLite answers a concurrent journal-mode change
with SQLITE_BUSY without waiting. Every mutation runs in a `BEGIN IMMEDIATE` transaction: SQLite's
write lock is held across processes from the first statement to COMMIT, so two processes (the CLI
and the gateway, or several gateway workers) can never both consume one code. Readers take no lock
in WAL mode: a read transaction sees one committed snapshot while a writer works. The file is
created 0600 below a private 0700 directory and refused when it is a symlink, foreign-owned or
loosely permissioned.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from ivoai.common.errors import IvoaiError, UnsafePathError
from ivoai.common.fsio import PRIVATE_FILE_MODE, check_stat, ensure_private_dir, file_lock
from ivoai.common.limits import OAUTH_SQLITE_BUSY_TIMEOUT_SECONDS


class StoreError(IvoaiError):
    """The state database failed (locked beyond the busy timeout, corrupt, unwritable)."""

    code = "state_store_error"


def prepare_file(root: Path, path: Path) -> Path:
    """Create (0600) or verify the database file `path` below the private data `root`.

    Raises:
        UnsafePathError: the directory or file is a symlink, foreign-owned or has a loose mode.
    """
    ensure_private_dir(root, path.parent)
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


class Database:
    """One connection per thread to one SQLite file (see module doc).

    `initialize` (under `init_lock`) switches the file to WAL and runs `schema` (idempotent DDL); a
    file whose `user_version` is newer than `version` was written by a newer ivoai and is refused
    rather than misread.
    """

    def __init__(self, root: Path, path: Path, schema: str, *, version: int) -> None:
        self.root = root
        self.path = path
        self._schema = schema
        self._version = version
        self._local = threading.local()
        self._all: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._lock = threading.Lock()

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use; those of ended threads are closed then).

        A connection is never used across `fork`: a child process opens its own.
        """
        held: tuple[int, sqlite3.Connection] | None = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid():
            return held[1]
        conn = self._open()
        with self._lock:
            ended = [c for t, c in self._all if not t.is_alive()]
            self._all = [(t, c) for t, c in self._all if t.is_alive()]
            self._all.append((threading.current_thread(), conn))
        for old in ended:
            with contextlib.suppress(sqlite3.Error):
                old.close()
        self._local.held = (os.getpid(), conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        with _mapped(self.path):
            conn = sqlite3.connect(
                self.path,
                timeout=OAUTH_SQLITE_BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(OAUTH_SQLITE_BUSY_TIMEOUT_SECONDS * 1000)}")
                # NORMAL in WAL mode: a committed change survives a crash of the process.
                conn.execute("PRAGMA synchronous = NORMAL")
            except BaseException:
                conn.close()
                raise
        return conn

    @contextlib.contextmanager
    def init_lock(self) -> Iterator[None]:
        """Exclusive across processes: hold it for `initialize` and any one-time import."""
        with file_lock(self.root, self.path.with_name(self.path.name + ".lock")):
            yield

    def initialize(self) -> None:
        """Switch the file to WAL and create or check its tables (call under `init_lock`).

        Raises:
            StoreError: WAL is unavailable, the file is corrupt, or its schema is newer than this code.
        """
        conn = self.connection()
        with _mapped(self.path):
            mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
            if mode != "wal":
                raise StoreError(f"{self.path} could not switch to WAL (journal_mode={mode})")
            self._migrate(conn)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if found > self._version:
            raise StoreError(
                f"{self.path} has schema version {found}, newer than this ivoai understands "
                f"({self._version}); upgrade ivoai or restore a backup"
            )
        conn.executescript(self._schema)
        if found < self._version:
            conn.execute(f"PRAGMA user_version = {int(self._version)}")

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """An immediate (write-locked) transaction, committed on success and rolled back on any error.

        Raises:
            StoreError: the database is locked beyond the busy timeout or failed.
        """
        conn = self.connection()
        with _mapped(self.path):
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # also after a failed COMMIT: never leave it mid-transaction
                    conn.execute("ROLLBACK")
                raise

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every statement in the block sees one snapshot."""
        conn = self.connection()
        with _mapped(self.path):
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def close(self) -> None:
        """Close every thread's connection (a later use opens a new one)."""
        with self._lock:
            conns, self._all = [c for _, c in self._all], []
        self._local = threading.local()
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()


@contextlib.contextmanager
def _mapped(path: Path) -> Iterator[None]:
    """SQLite failures as `StoreError` with the file named (no traceback reaches a user)."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        text = str(exc)
        if "locked" in text or "busy" in text:
            raise StoreError(
                f"{path} stayed locked for {OAUTH_SQLITE_BUSY_TIMEOUT_SECONDS:g}s by another process; retry"
            ) from None
        raise StoreError(f"{path}: {text}") from None
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: {exc}") from None
