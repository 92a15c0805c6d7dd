"""One way to use SQLite: private files, per-thread connections, transactions, migrations, packed reads.

- `prepare_file`: the database file is created 0600 below a private 0700 directory, and refused when
  it is a symlink, foreign-owned or loosely permissioned.
- `ConnectionPool`: one connection per thread (`isolation_level=None`: transactions are explicit),
  with the project's pragmas: a busy timeout, `synchronous=NORMAL` (in WAL mode a committed write
  survives a crash of the process; only a power loss can roll back the last commits, never corrupt
  the file), WAL (on every new connection, or once, under a lock, by the owner) and, where a store
  declares foreign keys, `foreign_keys=ON`. `write()` is a `BEGIN IMMEDIATE` transaction (SQLite's
  write lock from the first statement to COMMIT, across processes); `read()` sees one snapshot.
- `Migrations`: ordered, named steps, `PRAGMA user_version` counting how many ran; a database
  newer than the code (or, with a history table, with different step names) is refused, and
  `refuse_newer_file` does so before anything writes to the file (not even the journal mode).
- Packed reads (`exact_real`, `unpack`): many rows as ONE row holding a JSON array, for hot reads
  where iterating rows is the cost (see `unpack`).

Errors stay `sqlite3` errors unless the store gives an `ErrorNames`, which turns them into its own
errors with stable codes (never a traceback for users). `common` knows no store: each passes its
names, messages and pragmas in.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from ivoai.common.errors import UnsafePathError
from ivoai.common.fsio import PRIVATE_FILE_MODE, check_stat, ensure_private_dir

P = ParamSpec("P")
R = TypeVar("R")


def prepare_file(root: Path, path: Path) -> Path:
    """Create (0600) or verify the database file `path` below the private data `root`; return it.

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


# ---------------------------------------------------------------------------------- errors


def is_busy(exc: sqlite3.Error) -> bool:
    """True when SQLite gave up waiting for a lock (SQLITE_BUSY / SQLITE_LOCKED past the busy timeout)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    text = str(exc)
    return "locked" in text or "busy" in text


@dataclass(frozen=True)
class ErrorNames:
    """How one store names SQLite's failures: `busy()` past the busy timeout, `failed(text)` otherwise."""

    busy: Callable[[], Exception]
    failed: Callable[[str], Exception]

    def convert(self, exc: sqlite3.DatabaseError) -> Exception:
        """The store's error for `exc`."""
        return self.busy() if is_busy(exc) else self.failed(str(exc))

    @contextlib.contextmanager
    def mapped(self) -> Iterator[None]:
        """Raise the store's error instead of any `sqlite3.DatabaseError` from the block."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise self.convert(exc) from None

    def guard(self, fn: Callable[P, R]) -> Callable[P, R]:
        """Decorate `fn` so that SQLite failures leave it as the store's errors."""

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except sqlite3.DatabaseError as exc:
                raise self.convert(exc) from None

        return wrapper


# ----------------------------------------------------------------------------- connections


@dataclass(frozen=True)
class Pragmas:
    """What a store sets on each of its connections (`synchronous=NORMAL` always; see module doc).

    `wal_on_open=False`: the owner switches the file to WAL once (`ConnectionPool.switch_to_wal`),
    e.g. under a cross-process lock, because SQLite answers a concurrent journal-mode change with
    SQLITE_BUSY without waiting.
    """

    busy_timeout_seconds: float
    wal_on_open: bool = True
    foreign_keys: bool = False


class ConnectionPool:
    """One SQLite connection per thread to one file, all closed together (see module doc).

    Worker threads come and go (anyio retires a pool thread after 10 s idle): when a thread opens
    its connection, the connections of threads that have ended are closed, so a long-running server
    holds at most one connection per live thread instead of one per thread it ever had. A connection
    is never used across `fork`: a child process opens its own.

    With `closed`, `close()` is final and later use raises `closed()`; without it the pool reopens
    on the next use.
    """

    def __init__(
        self,
        path: Path,
        pragmas: Pragmas,
        *,
        errors: ErrorNames | None = None,
        wal_refused: Callable[[str], Exception] | None = None,
        closed: Callable[[], Exception] | None = None,
        row_factory: type[sqlite3.Row] | Callable[[sqlite3.Cursor, tuple[Any, ...]], object] | None = None,
    ) -> None:
        self.path = path
        self.pragmas = pragmas
        self._row_factory = row_factory  # e.g. sqlite3.Row, for a store that reads columns by name
        # how this store names what goes wrong (None: SQLite's own error, or reopen after close)
        self._errors, self._wal_refused, self._closed_error = errors, wal_refused, closed
        self._closed = False
        self._local = threading.local()
        self._all: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._lock = threading.Lock()

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use.

        Raises:
            the `closed()` error after a final `close()`; the store's errors (or sqlite3's) on open.
        """
        if self._closed:
            raise self._closed_now()
        held: tuple[int, sqlite3.Connection] | None = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid():
            return held[1]
        with self._mapped():
            conn = self._open()
        with self._lock:
            if self._closed:
                conn.close()
                raise self._closed_now()
            ended = [c for t, c in self._all if not t.is_alive()]
            self._all = [(t, c) for t, c in self._all if t.is_alive()]
            self._all.append((threading.current_thread(), conn))
        for old in ended:  # their threads are gone, so nothing can be using them
            with contextlib.suppress(sqlite3.Error):
                old.close()
        self._local.held = (os.getpid(), conn)
        return conn

    def open_count(self) -> int:
        """How many connections are open (one per live thread that has used the database)."""
        with self._lock:
            return len(self._all)

    def switch_to_wal(self, conn: sqlite3.Connection) -> None:
        """Put the file in WAL mode (persistent: recorded in the file).

        Raises:
            the `wal_refused(mode)` error (or sqlite3.OperationalError) when the file stays in another mode.
        """
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            if self._wal_refused is not None:
                raise self._wal_refused(str(mode))
            raise sqlite3.OperationalError(f"{self.path} could not switch to WAL (journal_mode={mode})")

    def _open(self) -> sqlite3.Connection:
        timeout = self.pragmas.busy_timeout_seconds
        conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
        if self._row_factory is not None:
            conn.row_factory = self._row_factory
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            if self.pragmas.wal_on_open:
                self.switch_to_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            if self.pragmas.foreign_keys:
                conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def _closed_now(self) -> Exception:
        assert self._closed_error is not None  # `_closed` is only ever set when close() is final
        return self._closed_error()

    def _mapped(self) -> contextlib.AbstractContextManager[None]:
        return self._errors.mapped() if self._errors is not None else contextlib.nullcontext()

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """An immediate (write-locked) transaction: committed on success, rolled back on any error."""
        conn = self.connection()
        with self._mapped():
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
        with self._mapped():
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def close(self) -> None:
        """Close every thread's connection (final when the pool was given `closed`)."""
        with self._lock:
            self._closed = self._closed_error is not None
            conns, self._all = [c for _, c in self._all], []
        self._local = threading.local()
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()


# ------------------------------------------------------------------------------ migrations


@dataclass(frozen=True)
class Migration:
    """One released schema step: appended, never edited or reordered."""

    version: int
    name: str
    apply: Callable[[sqlite3.Connection], None]


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run `script` statement by statement inside the open transaction.

    `executescript` would COMMIT it first; splitting on `;` would cut a trigger's body apart.

    Raises:
        ValueError: the script ends in an incomplete statement.
    """
    pending = ""
    for line in script.splitlines(keepends=True):
        if not pending and (not line.strip() or line.strip().startswith("--")):
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            conn.execute(pending)
            pending = ""
    if pending.strip():
        raise ValueError("incomplete SQL statement in migration")


def user_version(conn: sqlite3.Connection) -> int:
    """The number of migration steps recorded in the database (`PRAGMA user_version`)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


@dataclass(frozen=True)
class Migrations:
    """A store's ordered steps and how it words a refusal.

    `newer(found, latest)` is raised for a database newer than the code. With `history_table`
    (created by the first step: `version INTEGER PRIMARY KEY, name TEXT, applied_at REAL`) each
    step's name is recorded, and a database whose recorded names differ raises
    `different(version, recorded name, expected name)`.
    """

    steps: tuple[Migration, ...]
    newer: Callable[[int, int], Exception]
    history_table: str | None = None
    different: Callable[[int, str | None, str], Exception] | None = None

    def __post_init__(self) -> None:
        if [s.version for s in self.steps] != list(range(1, len(self.steps) + 1)):
            raise ValueError("migration steps must be numbered 1, 2, 3, ... in order")
        if self.history_table is not None and self.different is None:
            raise ValueError("a history table needs a `different` error")

    @property
    def latest(self) -> Migration:
        """The last step this code knows."""
        return self.steps[-1]

    def refuse_newer(self, version: int, latest: int | None = None) -> None:
        """Raise `newer` when `version` is beyond `latest` (default: the last step)."""
        limit = self.latest.version if latest is None else latest
        if version > limit:
            raise self.newer(version, limit)

    def refuse_newer_file(self, path: Path, *, timeout_seconds: float) -> int:
        """Read the version of the file at `path` without writing anything to it; refuse a newer one.

        Call before a pool opens it: a pool's first connection may switch the journal mode, and a
        database from a newer ivoai must be left exactly as it was.
        """
        probe = sqlite3.connect(path, timeout=timeout_seconds)
        try:
            version = user_version(probe)
        finally:
            probe.close()
        self.refuse_newer(version)
        return version

    def check(self, conn: sqlite3.Connection, *, upto: int | None = None) -> int:
        """The database's version after verifying that this code knows every step it records."""
        version = user_version(conn)
        self.refuse_newer(version, upto)
        if version > 0 and self.history_table is not None:
            assert self.different is not None  # checked in __post_init__
            recorded = dict(conn.execute(f"SELECT version, name FROM {self.history_table}").fetchall())
            for step in self.steps[:version]:
                if recorded.get(step.version) != step.name:
                    raise self.different(step.version, recorded.get(step.version), step.name)
        return version

    def migrate(self, conn: sqlite3.Connection, *, upto: int | None = None) -> int:
        """Apply every pending step (up to `upto`), each in its own immediate transaction; return the version.

        Raises:
            the `newer` or `different` error: the database is newer or has another history.
        """
        target = self.latest.version if upto is None else upto
        while True:
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = self.check(conn)
                if version >= target:
                    conn.execute("COMMIT")
                    return version
                step = self.steps[version]
                step.apply(conn)
                if self.history_table is not None:
                    conn.execute(
                        f"INSERT INTO {self.history_table} (version, name, applied_at) VALUES (?, ?, ?)",
                        (step.version, step.name, time.time()),
                    )
                conn.execute(f"PRAGMA user_version = {int(step.version)}")
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise


# ---------------------------------------------------------------------------- packed reads

# SQLite's printf('%!.17g') round-trips every double tested whose magnitude is below 1e100 (it
# formats through long double; errors appear only far above that). Timestamps are ~1e9; a value
# outside this range travels as NULL, and the caller reads that batch row by row, so a packed read
# is always exact.
EXACT_REAL_RANGE = 1e15


def exact_real(column: str) -> str:
    """SQL: the REAL `column` as a decimal string that `float()` turns back into the same double, or NULL."""
    return f"CASE WHEN abs({column}) < {EXACT_REAL_RANGE:.0f} THEN printf('%!.17g', {column}) END"


def packed(columns: Sequence[str]) -> str:
    """SQL aggregate: every row's `columns` as ONE JSON array of arrays, in the rows' order.

    Why: the sqlite3 module releases and re-takes the GIL around every step, and under concurrent
    calls every re-take waits behind the event loop and the other worker threads; one row instead
    of hundreds removes that convoy. Text, integers and NULL travel exactly; a REAL column must go
    through `exact_real` (and the caller fall back to a row-by-row read when it yields NULL for a
    non-NULL value); BLOBs cannot be packed (SQLite's JSON refuses them).
    """
    return f"json_group_array(json_array({', '.join(columns)}))"


def unpack(cell: str | None) -> list[list[Any]]:
    """The rows of one `packed` value (an aggregate over no rows gives `[]`; so does NULL)."""
    return json.loads(cell) if cell else []
