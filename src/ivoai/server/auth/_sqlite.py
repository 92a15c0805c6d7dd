"""A private SQLite file shared by independent processes: WAL, per-thread connections, locked writes.

The first use of a file (switching it to WAL, creating or checking its tables) runs under an
exclusive `flock` on a sibling `.lock` file, because SQLite answers a concurrent journal-mode change
with SQLITE_BUSY without waiting. Every mutation runs in a `BEGIN IMMEDIATE` transaction: SQLite's
write lock is held across processes from the first statement to COMMIT, so two processes (the CLI
and the gateway, or several gateway workers) can never both consume one code. Readers take no lock
in WAL mode: a read transaction sees one committed snapshot while a writer works. The file is
created 0600 below a private 0700 directory and refused when it is a symlink, foreign-owned or
loosely permissioned (`common.sqlite` does all of this; this module adds the lock and the names).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from ivoai.common import sqlite
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import file_lock
from ivoai.common.limits import OAUTH_SQLITE_BUSY_TIMEOUT_SECONDS


class StoreError(IvoaiError):
    """The state database failed (locked beyond the busy timeout, corrupt, unwritable)."""

    code = "state_store_error"


class Database(sqlite.ConnectionPool):
    """One connection per thread to one SQLite file (see module doc).

    `initialize` (under `init_lock`) refuses a file whose `user_version` is newer than the last of
    `steps` (written by a newer ivoai) before anything writes to it, switches the file to WAL and
    applies the pending steps. Every SQLite failure is a `StoreError` naming the file.
    """

    def __init__(self, root: Path, path: Path, steps: tuple[sqlite.Migration, ...]) -> None:
        names = sqlite.ErrorNames(
            busy=lambda: StoreError(
                f"{path} stayed locked for {OAUTH_SQLITE_BUSY_TIMEOUT_SECONDS:g}s by another process; retry"
            ),
            failed=lambda text: StoreError(f"{path}: {text}"),
        )
        super().__init__(
            path,
            sqlite.Pragmas(busy_timeout_seconds=OAUTH_SQLITE_BUSY_TIMEOUT_SECONDS, wal_on_open=False),
            errors=names,
            wal_refused=lambda mode: StoreError(f"{path} could not switch to WAL (journal_mode={mode})"),
        )
        self.root = root
        self.migrations = sqlite.Migrations(
            steps,
            newer=lambda found, latest: StoreError(
                f"{path} has schema version {found}, newer than this ivoai understands "
                f"({latest}); upgrade ivoai or restore a backup"
            ),
        )
        self._names = names

    @contextlib.contextmanager
    def init_lock(self) -> Iterator[None]:
        """Exclusive across processes: hold it for `initialize` and any one-time import."""
        with file_lock(self.root, self.path.with_name(self.path.name + ".lock")):
            yield

    def initialize(self) -> None:
        """Switch the file to WAL and create or upgrade its tables (call under `init_lock`).

        Raises:
            StoreError: WAL is unavailable, the file is corrupt, or its schema is newer than this code.
        """
        with self._names.mapped():
            self.migrations.refuse_newer_file(self.path, timeout_seconds=OAUTH_SQLITE_BUSY_TIMEOUT_SECONDS)
            conn = self.connection()
            self.switch_to_wal(conn)
            self.migrations.migrate(conn)


def make_room(conn: sqlite3.Connection, table: str, key: str, cap: int, where: str = "1") -> None:
    """Before one insert into a bounded `table`: evict the oldest rows matching `where` (by
    `created_at`, then insertion order) until one more fits under `cap`. Names are code constants."""
    (count,) = conn.execute(f"SELECT count(*) FROM {table} WHERE {where}").fetchone()
    excess = count - cap + 1
    if excess > 0:
        conn.execute(
            f"DELETE FROM {table} WHERE {key} IN "
            f"(SELECT {key} FROM {table} WHERE {where} ORDER BY created_at, rowid LIMIT ?)",
            (excess,),
        )
