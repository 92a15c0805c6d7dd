"""The shared SQLite helper on real files: pragmas, per-thread connections, transactions and their
errors, migrations that refuse newer or foreign databases untouched, and exact packed reads."""

from __future__ import annotations

import hashlib
import math
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivoai.common import sqlite
from ivoai.common.errors import UnsafePathError


class _Busy(Exception):
    pass


class _Failed(Exception):
    pass


class _Closed(Exception):
    pass


NAMES = sqlite.ErrorNames(busy=lambda: _Busy("locked; retry"), failed=lambda text: _Failed(f"db: {text}"))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir(mode=0o700)
    return sqlite.prepare_file(root, root / "store" / "state.sqlite3")


def _pool(
    path: Path, busy: float = 0.05, *, wal: bool = True, foreign_keys: bool = False, **kwargs: Any
) -> sqlite.ConnectionPool:
    return sqlite.ConnectionPool(path, sqlite.Pragmas(busy, wal, foreign_keys), **kwargs)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------ files


def test_prepare_file_creates_a_private_file_in_a_private_directory(db_path: Path) -> None:
    assert (db_path.stat().st_mode & 0o777, db_path.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    assert sqlite.prepare_file(db_path.parent.parent, db_path) == db_path  # an existing one is verified


def test_prepare_file_refuses_a_symlink_and_a_file_others_can_read(db_path: Path, tmp_path: Path) -> None:
    link = db_path.with_name("link.sqlite3")
    os.symlink(tmp_path / "elsewhere", link)
    with pytest.raises(UnsafePathError, match="symlink"):
        sqlite.prepare_file(db_path.parent.parent, link)
    db_path.chmod(0o644)
    with pytest.raises(UnsafePathError, match="0600"):
        sqlite.prepare_file(db_path.parent.parent, db_path)


# ------------------------------------------------------------------------ connections


def test_each_connection_gets_the_declared_pragmas(db_path: Path) -> None:
    pool = _pool(db_path, 2.5, foreign_keys=True)
    conn = pool.connection()
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.isolation_level is None  # transactions are explicit
    pool.close()


def test_a_store_may_read_rows_by_column_name(db_path: Path) -> None:
    pool = _pool(db_path, row_factory=sqlite3.Row)
    row = pool.connection().execute("SELECT 1 AS one, 'x' AS name").fetchone()
    assert (row["one"], row["name"]) == (1, "x")
    pool.close()


def test_without_wal_on_open_the_owner_switches_the_file_once(db_path: Path) -> None:
    pool = _pool(db_path, wal=False)
    conn = pool.connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 0
    pool.switch_to_wal(conn)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    pool.close()


def test_a_file_that_cannot_use_wal_is_the_stores_error(tmp_path: Path) -> None:
    pool = _pool(Path(":memory:"), wal_refused=lambda mode: _Failed(f"mode {mode}"))
    with pytest.raises(_Failed, match="mode memory"):
        pool.connection()


def test_each_thread_has_its_own_connection_and_ended_threads_are_closed(db_path: Path) -> None:
    pool = _pool(db_path)
    mine = pool.connection()
    theirs: list[sqlite3.Connection] = []
    for _ in range(3):
        worker = threading.Thread(target=lambda: theirs.append(pool.connection()))
        worker.start()
        worker.join()
    assert len({id(c) for c in (mine, *theirs)}) == 4
    assert pool.open_count() == 2  # this thread's and the last worker's
    with pytest.raises(sqlite3.ProgrammingError):
        theirs[0].execute("SELECT 1")
    assert pool.connection() is mine
    pool.close()


def test_a_connection_is_not_reused_in_another_process(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = _pool(db_path)
    parent = pool.connection()
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as seen from a forked child
    assert pool.connection() is not parent
    pool.close()


def test_close_is_final_only_when_the_pool_names_a_closed_error(db_path: Path) -> None:
    reusable = _pool(db_path)
    first = reusable.connection()
    reusable.close()
    with pytest.raises(sqlite3.ProgrammingError):
        first.execute("SELECT 1")
    assert reusable.connection().execute("SELECT 1").fetchone() == (1,)
    reusable.close()

    final = _pool(db_path, closed=lambda: _Closed("closed"))
    final.connection()
    final.close()
    with pytest.raises(_Closed):
        final.connection()
    with pytest.raises(_Closed), final.write():
        pass
    assert final.open_count() == 0


# ----------------------------------------------------------------------- transactions


def test_write_commits_on_success_and_rolls_back_on_any_error(db_path: Path) -> None:
    pool = _pool(db_path)
    with pool.write() as conn:
        conn.execute("CREATE TABLE t (v INTEGER)")
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(KeyError), pool.write() as conn:
        conn.execute("INSERT INTO t VALUES (2)")
        raise KeyError("caller failed")
    conn = pool.connection()
    assert not conn.in_transaction
    with pool.read() as snapshot:
        assert snapshot.execute("SELECT v FROM t").fetchall() == [(1,)]
    assert not conn.in_transaction
    pool.close()


def test_a_read_sees_one_snapshot_while_another_connection_commits(db_path: Path) -> None:
    pool = _pool(db_path)
    with pool.write() as conn:
        conn.execute("CREATE TABLE t (v INTEGER)")
    other = sqlite3.connect(db_path, isolation_level=None)
    with pool.read() as snapshot:
        assert snapshot.execute("SELECT count(*) FROM t").fetchone() == (0,)
        other.execute("INSERT INTO t VALUES (1)")
        assert snapshot.execute("SELECT count(*) FROM t").fetchone() == (0,)
    assert pool.connection().execute("SELECT count(*) FROM t").fetchone() == (1,)
    other.close()
    pool.close()


def test_errors_keep_sqlites_types_unless_the_store_names_them(db_path: Path) -> None:
    plain = _pool(db_path)
    with pytest.raises(sqlite3.OperationalError, match="syntax"), plain.write() as conn:
        conn.execute("NOT SQL")
    named = _pool(db_path, errors=NAMES)
    with pytest.raises(_Failed, match="^db: .*syntax"), named.write() as conn:
        conn.execute("NOT SQL")
    assert not named.connection().in_transaction
    plain.close()
    named.close()


def test_a_write_blocked_past_the_busy_timeout_is_the_stores_busy_error(db_path: Path) -> None:
    pool = _pool(db_path, errors=NAMES)
    pool.connection()  # WAL on
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(_Busy, match="retry"), pool.write():
        pass
    holder.execute("ROLLBACK")
    holder.close()
    with pool.write() as conn:  # and it recovers
        conn.execute("CREATE TABLE t (v INTEGER)")
    pool.close()


def test_guard_names_the_failures_of_a_whole_function(db_path: Path) -> None:
    conn = sqlite3.connect(db_path)

    @NAMES.guard
    def broken(table: str) -> object:
        return conn.execute(f"SELECT * FROM {table}").fetchall()

    with pytest.raises(_Failed, match="no such table: missing"):
        broken("missing")
    assert not sqlite.is_busy(sqlite3.IntegrityError("busy"))  # only an operational lock error is busy
    conn.close()


# ------------------------------------------------------------------------- migrations


def _steps(count: int) -> tuple[sqlite.Migration, ...]:
    first = sqlite.Migration(
        1,
        "base",
        lambda c: sqlite.run_script(
            c,
            """
            CREATE TABLE history (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL);
            -- a trigger body holds `;` of its own: statements are split where SQLite says they end
            CREATE TABLE items (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
            CREATE TABLE counts (n INTEGER NOT NULL);
            INSERT INTO counts VALUES (0);
            CREATE TRIGGER items_count AFTER INSERT ON items BEGIN
                UPDATE counts SET n = n + 1;
                UPDATE counts SET n = n + 0;
            END;
            """,
        ),
    )
    return (first, *(sqlite.Migration(v, f"step_{v}", _create_table(f"t{v}")) for v in range(2, count + 1)))


def _create_table(name: str) -> Callable[[sqlite3.Connection], None]:
    def apply(conn: sqlite3.Connection) -> None:
        conn.execute(f"CREATE TABLE {name} (x INTEGER)")

    return apply


def _migrations(count: int) -> sqlite.Migrations:
    return sqlite.Migrations(
        _steps(count),
        newer=lambda found, latest: _Failed(f"version {found} is newer than {latest}"),
        history_table="history",
        different=lambda v, recorded, expected: _Failed(f"step {v} is {recorded!r}, expected {expected!r}"),
    )


def test_steps_apply_in_order_and_each_is_recorded(db_path: Path) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    assert _migrations(2).migrate(conn, upto=1) == 1
    assert _migrations(3).migrate(conn) == 3
    assert sqlite.user_version(conn) == 3
    assert conn.execute("SELECT version, name FROM history ORDER BY version").fetchall() == [
        (1, "base"),
        (2, "step_2"),
        (3, "step_3"),
    ]
    conn.execute("INSERT INTO items (body) VALUES ('x')")
    assert conn.execute("SELECT n FROM counts").fetchone() == (1,)
    assert _migrations(3).migrate(conn) == 3  # nothing pending: nothing runs
    conn.close()


def test_a_failing_step_leaves_the_database_at_the_previous_version(db_path: Path) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    broken = sqlite.Migration(2, "broken", lambda c: sqlite.run_script(c, "CREATE TABLE t2 (x);\nNOT SQL;"))
    runner = sqlite.Migrations((_steps(1)[0], broken), newer=lambda f, lt: _Failed("newer"))
    with pytest.raises(sqlite3.OperationalError):
        runner.migrate(conn)
    assert sqlite.user_version(conn) == 1
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 't2'").fetchall() == []
    assert not conn.in_transaction
    conn.close()


def test_a_database_newer_than_the_code_is_refused_and_left_untouched(db_path: Path) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    _migrations(3).migrate(conn)
    conn.close()
    before = _digest(db_path)
    with pytest.raises(_Failed, match="version 3 is newer than 2"):
        _migrations(2).refuse_newer_file(db_path, timeout_seconds=1)
    assert _digest(db_path) == before
    assert not Path(f"{db_path}-wal").exists()
    conn = sqlite3.connect(db_path, isolation_level=None)
    with pytest.raises(_Failed, match="newer"):
        _migrations(2).migrate(conn)
    assert sqlite.user_version(conn) == 3
    conn.close()


def test_a_database_with_another_history_is_refused(db_path: Path) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    _migrations(2).migrate(conn)
    conn.execute("UPDATE history SET name = 'other' WHERE version = 2")
    with pytest.raises(_Failed, match="step 2 is 'other', expected 'step_2'"):
        _migrations(3).migrate(conn)
    conn.close()


def test_steps_must_be_numbered_from_one_and_a_history_needs_its_error() -> None:
    step = sqlite.Migration(2, "two", lambda c: None)
    with pytest.raises(ValueError, match="numbered"):
        sqlite.Migrations((step,), newer=lambda f, lt: _Failed("newer"))
    with pytest.raises(ValueError, match="different"):
        sqlite.Migrations(_steps(1), newer=lambda f, lt: _Failed("newer"), history_table="history")


def test_an_incomplete_statement_in_a_script_is_an_error(db_path: Path) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    with pytest.raises(ValueError, match="incomplete"):
        sqlite.run_script(conn, "CREATE TABLE a (x);\nCREATE TABLE b (x")
    conn.close()


# ----------------------------------------------------------------------- packed reads

AWKWARD_TEXTS = [
    "",
    "plain",
    "quote ' \" `",
    "back\\slash",
    "ctl \x01\x1f\t\n\r",
    "nul \x00 inside",
    "emoji 🙂",
    '{"a": [1]}',
]


def _packed_and_by_row(conn: sqlite3.Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    cols = ["id", "body", "n", sqlite.exact_real("at")]
    (cell,) = conn.execute(f"SELECT {sqlite.packed(cols)} FROM (SELECT * FROM t ORDER BY id)").fetchone()
    rows = [tuple(r) for r in sqlite.unpack(cell)]
    packed = [(i, b, n, None if a is None else float(a)) for i, b, n, a in rows]
    return packed, [tuple(r) for r in conn.execute("SELECT id, body, n, at FROM t ORDER BY id")]


@settings(max_examples=80, deadline=None)
@given(
    texts=st.lists(st.text() | st.sampled_from(AWKWARD_TEXTS), min_size=1, max_size=8),
    numbers=st.lists(st.integers(-(2**63), 2**63 - 1) | st.none(), min_size=8, max_size=8),
    reals=st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=8, max_size=8),
)
def test_a_packed_read_equals_the_row_by_row_read_wherever_it_can_carry_the_value(
    texts: list[str], numbers: list[int | None], reals: list[float]
) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT, n INTEGER, at REAL)")
    conn.executemany(
        "INSERT INTO t (body, n, at) VALUES (?, ?, ?)",
        [(text, numbers[i], reals[i]) for i, text in enumerate(texts)],
    )
    packed, by_row = _packed_and_by_row(conn)
    conn.close()
    assert len(packed) == len(by_row)
    for got, want in zip(packed, by_row, strict=True):
        assert got[:3] == want[:3]
        if abs(want[3]) < sqlite.EXACT_REAL_RANGE:
            assert got[3] == want[3] and math.copysign(1, got[3]) == math.copysign(1, want[3])
        else:
            assert got[3] is None  # the caller reads such a batch row by row


def test_an_aggregate_over_no_rows_unpacks_to_nothing(db_path: Path) -> None:
    conn = sqlite3.connect(db_path)
    (cell,) = conn.execute(f"SELECT {sqlite.packed(['1'])} FROM (SELECT 1 WHERE 0)").fetchone()
    assert (sqlite.unpack(cell), sqlite.unpack(None)) == ([], [])
    conn.close()
