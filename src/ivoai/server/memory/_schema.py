"""Schema migrations: ordered, named steps; `PRAGMA user_version` records how many ran.

A step is appended, never edited or reordered, once released. A database whose version is newer
than the last step here (or whose recorded step names differ) is refused untouched: it was written
by a newer or different ivoai, and guessing would risk the user's memory.
"""

from __future__ import annotations

import sqlite3

from ivoai.common.sqlite import Migration, Migrations, run_script, user_version
from ivoai.server.memory.errors import MemorySchemaError


def _pages(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
        CREATE TABLE schema_migrations (
            version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL
        ) STRICT;
        -- The head row of each page: its current version (a tombstone after a delete).
        CREATE TABLE pages (
            id INTEGER PRIMARY KEY,
            workspace TEXT NOT NULL,
            project TEXT NOT NULL,
            path TEXT NOT NULL,
            version INTEGER NOT NULL,
            deleted INTEGER NOT NULL DEFAULT 0,
            title TEXT NOT NULL,
            tags TEXT NOT NULL,
            entities TEXT NOT NULL,
            kind TEXT NOT NULL,
            pinned INTEGER NOT NULL DEFAULT 0,
            expires_at REAL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            useful INTEGER NOT NULL DEFAULT 0,
            not_useful INTEGER NOT NULL DEFAULT 0,
            -- Last on purpose: the metadata columns before it are read without touching the
            -- overflow pages of a long body (ranking and scope filters read only those).
            body TEXT NOT NULL,
            UNIQUE (workspace, project, path)
        ) STRICT;
        CREATE INDEX pages_scope_updated ON pages (workspace, project, deleted, updated_at);
        -- Superseded versions (including the content a tombstone replaced).
        CREATE TABLE page_versions (
            page_id INTEGER NOT NULL REFERENCES pages (id),
            version INTEGER NOT NULL,
            deleted INTEGER NOT NULL,
            title TEXT NOT NULL,
            tags TEXT NOT NULL,
            entities TEXT NOT NULL,
            kind TEXT NOT NULL,
            pinned INTEGER NOT NULL,
            expires_at REAL,
            body TEXT NOT NULL,
            written_at REAL NOT NULL,
            PRIMARY KEY (page_id, version)
        ) STRICT;
        CREATE VIRTUAL TABLE pages_fts USING fts5 (
            path, title, body, tags, entities,
            content = 'pages', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER pages_fts_insert AFTER INSERT ON pages BEGIN
            INSERT INTO pages_fts (rowid, path, title, body, tags, entities)
            VALUES (new.id, new.path, new.title, new.body, new.tags, new.entities);
        END;
        CREATE TRIGGER pages_fts_delete AFTER DELETE ON pages BEGIN
            INSERT INTO pages_fts (pages_fts, rowid, path, title, body, tags, entities)
            VALUES ('delete', old.id, old.path, old.title, old.body, old.tags, old.entities);
        END;
        CREATE TRIGGER pages_fts_update AFTER UPDATE OF path, title, body, tags, entities ON pages BEGIN
            INSERT INTO pages_fts (pages_fts, rowid, path, title, body, tags, entities)
            VALUES ('delete', old.id, old.path, old.title, old.body, old.tags, old.entities);
            INSERT INTO pages_fts (rowid, path, title, body, tags, entities)
            VALUES (new.id, new.path, new.title, new.body, new.tags, new.entities);
        END;
        """,
    )


def _feedback(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE page_feedback (
            id INTEGER PRIMARY KEY,
            page_id INTEGER NOT NULL REFERENCES pages (id),
            version INTEGER NOT NULL,
            useful INTEGER NOT NULL,
            note TEXT,
            at REAL NOT NULL
        ) STRICT;
        """,
    )


def _vectors(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        -- One embedding per page head; `model` names the embedder so a change of model is detected.
        CREATE TABLE page_vectors (
            page_id INTEGER PRIMARY KEY REFERENCES pages (id),
            version INTEGER NOT NULL,
            model TEXT NOT NULL,
            dims INTEGER NOT NULL,
            vec BLOB NOT NULL
        ) STRICT;
        """,
    )


def _hooks(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE hook_sessions (
            id INTEGER PRIMARY KEY,
            workspace TEXT NOT NULL,
            project TEXT NOT NULL,
            session_id TEXT NOT NULL,
            path TEXT NOT NULL,
            agent TEXT NOT NULL,
            first_at REAL NOT NULL,
            dropped_events INTEGER NOT NULL DEFAULT 0,
            UNIQUE (workspace, project, session_id)
        ) STRICT;
        -- Redacted events; the primary key is the idempotency key (per workspace).
        CREATE TABLE hook_events (
            workspace TEXT NOT NULL,
            idempotency_key TEXT NOT NULL,
            session_row INTEGER NOT NULL REFERENCES hook_sessions (id),
            at REAL NOT NULL,
            received_at REAL NOT NULL,
            digest TEXT NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (workspace, idempotency_key)
        ) STRICT;
        CREATE INDEX hook_events_session ON hook_events (session_row, at);
        """,
    )


def _bump(scope: str) -> str:
    return (
        f"INSERT INTO scope_generations (workspace, project, gen) {scope} "
        "ON CONFLICT (workspace, project) DO UPDATE SET gen = gen + 1;"
    )


def _scope_generations(conn: sqlite3.Connection) -> None:
    # A per-scope counter bumped by triggers whenever what semantic ranking reads changes (a
    # vector, or a page's liveness, version, recency or expiry), in any process: a cache of a
    # scope's vectors is valid exactly while its counters are unchanged.
    by_vector_new = "SELECT workspace, project, 1 FROM pages WHERE id = new.page_id"
    by_vector_old = "SELECT workspace, project, 1 FROM pages WHERE id = old.page_id"
    by_page = "SELECT new.workspace, new.project, 1 WHERE true"
    run_script(
        conn,
        f"""
        CREATE TABLE scope_generations (
            workspace TEXT NOT NULL, project TEXT NOT NULL, gen INTEGER NOT NULL,
            PRIMARY KEY (workspace, project)
        ) STRICT;
        CREATE TRIGGER scope_gen_vector_insert AFTER INSERT ON page_vectors BEGIN {_bump(by_vector_new)} END;
        CREATE TRIGGER scope_gen_vector_update AFTER UPDATE ON page_vectors BEGIN {_bump(by_vector_new)} END;
        CREATE TRIGGER scope_gen_vector_delete AFTER DELETE ON page_vectors BEGIN {_bump(by_vector_old)} END;
        CREATE TRIGGER scope_gen_page_insert AFTER INSERT ON pages BEGIN {_bump(by_page)} END;
        CREATE TRIGGER scope_gen_page_update AFTER UPDATE OF deleted, version, updated_at, expires_at ON pages
        BEGIN {_bump(by_page)} END;
        """,
    )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "pages_versions_fts", _pages),
    Migration(2, "page_feedback", _feedback),
    Migration(3, "page_vectors", _vectors),
    Migration(4, "hook_intake", _hooks),
    Migration(5, "scope_generations", _scope_generations),
)
LATEST = MIGRATIONS[-1]


def _newer(version: int, latest: int) -> MemorySchemaError:
    return MemorySchemaError(
        f"memory database schema version {version} is newer than this ivoai supports ({latest}); "
        "upgrade ivoai (the database was left untouched)"
    )


def _different(version: int, recorded: str | None, expected: str) -> MemorySchemaError:
    return MemorySchemaError(
        f"memory database step {version} is {recorded!r}, "
        f"expected {expected!r}; refusing to use a database with a different history"
    )


RUNNER = Migrations(MIGRATIONS, newer=_newer, history_table="schema_migrations", different=_different)


def current_version(conn: sqlite3.Connection) -> int:
    """The number of migration steps recorded in the database."""
    return user_version(conn)


def check_supported_version(version: int, latest: int = LATEST.version) -> None:
    """Refuse a recorded version newer than the last step this code knows.

    Raises:
        MemorySchemaError: always, when `version > latest`.
    """
    RUNNER.refuse_newer(version, latest)


def check_supported(conn: sqlite3.Connection, *, upto: int | None = None) -> int:
    """Return the database's version after verifying this code knows every step it records.

    Raises:
        MemorySchemaError: the database is newer than this code, or its step names differ.
    """
    return RUNNER.check(conn, upto=upto)


def migrate(conn: sqlite3.Connection, *, upto: int | None = None) -> int:
    """Apply every pending step (up to `upto`), each in its own immediate transaction.

    Raises:
        MemorySchemaError: the database is newer than this code or has a different history.
    """
    return RUNNER.migrate(conn, upto=upto)
