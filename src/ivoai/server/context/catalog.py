"""The catalog: one SQLite file (WAL) holding connector definitions, canonical documents with their
normalized text (the authoritative corpus), chunk spans, skipped files and ingestion runs.

Chunk text is not stored twice: a chunk is a span [start, end) of code points of its document's body
(SQLite's `substr` counts characters, i.e. code points). One connection per thread.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ivoai.common import sqlite
from ivoai.common.procid import is_alive, own_marker
from ivoai.server.context.errors import CatalogSchemaError, ConnectorExistsError, ConnectorNotFoundError

CATALOG_FILE = "catalog.sqlite3"
BUSY_TIMEOUT_SECONDS = 10.0  # a concurrent writer (ingest vs connector remove) finishes a batch within this

# chunks.dense: whether the chunk's index point has its dense vector
DENSE_PENDING = 0  # written with its BM25 vector only; phase 2 embeds it
DENSE_EMBEDDED = 1  # the point has both vectors
DENSE_LEXICAL_ONLY = 2  # a lockfile, generated or minified document: not embedded by rule


@dataclass(frozen=True)
class ConnectorRow:
    name: str
    type: str
    path: str
    created_at: float
    state: str  # active | removing


@dataclass(frozen=True)
class ChunkRow:
    chunk_id: str
    index: int
    start: int
    end: int
    dense: int = DENSE_PENDING


@dataclass(frozen=True)
class DocumentRecord:
    document_id: str
    connector: str
    path: str
    size: int
    content_hash: str
    mtime: float
    body: str
    chunks: tuple[ChunkRow, ...]
    metadata: dict[str, Any]


@dataclass(frozen=True)
class KnownDocument:
    document_id: str
    content_hash: str
    chunk_ids: frozenset[str]


@dataclass(frozen=True)
class ChunkHit:
    chunk_id: str
    document_id: str
    connector: str
    path: str
    index: int
    start: int
    end: int
    text: str
    updated_at: float
    dense: int = DENSE_EMBEDDED


@dataclass(frozen=True)
class PendingChunk:
    """A chunk whose point still lacks its dense vector, with the text to embed."""

    chunk_id: str
    document_id: str
    connector: str
    path: str
    index: int
    text: str


@dataclass(frozen=True)
class Coverage:
    """How many chunks have their dense vector: embedded + pending + lexical_only = total."""

    total: int
    embedded: int
    pending: int
    lexical_only: int
    pending_documents: int


def _m1(db: sqlite3.Connection) -> None:
    sqlite.run_script(
        db,
        """
        CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE connectors(
            name TEXT PRIMARY KEY, type TEXT NOT NULL, path TEXT NOT NULL, created_at REAL NOT NULL,
            state TEXT NOT NULL DEFAULT 'active', metadata TEXT NOT NULL DEFAULT '{}');
        CREATE TABLE documents(
            document_id TEXT PRIMARY KEY, connector TEXT NOT NULL REFERENCES connectors(name),
            path TEXT NOT NULL, size INTEGER NOT NULL, content_hash TEXT NOT NULL, mtime REAL NOT NULL,
            first_seen REAL NOT NULL, updated_at REAL NOT NULL, metadata TEXT NOT NULL, body TEXT NOT NULL,
            UNIQUE(connector, path));
        CREATE INDEX documents_updated ON documents(updated_at DESC);
        CREATE TABLE chunks(
            chunk_id TEXT PRIMARY KEY,
            document_id TEXT NOT NULL REFERENCES documents(document_id) ON DELETE CASCADE,
            idx INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL);
        CREATE INDEX chunks_document ON chunks(document_id);
        CREATE TABLE skipped(connector TEXT NOT NULL, path TEXT NOT NULL, reason TEXT NOT NULL,
            PRIMARY KEY(connector, path));
        CREATE TABLE runs(
            run_id TEXT PRIMARY KEY, started_at REAL NOT NULL, finished_at REAL, status TEXT NOT NULL,
            connector TEXT, stats TEXT NOT NULL DEFAULT '{}');
        """,
    )


def _m2(db: sqlite3.Connection) -> None:
    """Two-phase ingestion: per-chunk dense state; the process behind a run (to tell dead runs)."""
    sqlite.run_script(
        db,
        """
        ALTER TABLE chunks ADD COLUMN dense INTEGER NOT NULL DEFAULT 1;
        CREATE INDEX chunks_not_embedded ON chunks(dense) WHERE dense != 1;
        ALTER TABLE runs ADD COLUMN pid INTEGER;
        ALTER TABLE runs ADD COLUMN pid_marker TEXT NOT NULL DEFAULT '';
        """,
    )


def _newer(version: int, latest: int) -> CatalogSchemaError:
    return CatalogSchemaError(
        f"context catalog schema version {version} is newer than this ivoai supports ({latest}); "
        "upgrade ivoai (the catalog was left untouched)"
    )


# user_version counts the steps (no history table: catalogs written before the shared runner have none)
MIGRATIONS = sqlite.Migrations(
    (sqlite.Migration(1, "catalog", _m1), sqlite.Migration(2, "two_phase", _m2)), newer=_newer
)

_RESOLVE_SQL = (
    "SELECT c.chunk_id, c.document_id, d.connector, d.path, c.idx, c.start, c.end,"
    " substr(d.body, c.start + 1, c.end - c.start) AS text, d.updated_at, c.dense"
    " FROM chunks c JOIN documents d USING(document_id)"
    " JOIN connectors k ON k.name = d.connector AND k.state = 'active'"
    " WHERE c.chunk_id IN ({marks})"
)
_RESOLVE_COLUMNS = ("chunk_id", "document_id", "connector", "path", "idx", "start", "end", "text")
_RESOLVE_AS_ONE_ROW = sqlite.packed((*_RESOLVE_COLUMNS, sqlite.exact_real("updated_at"), "dense"))


def _resolve_rows(db: sqlite3.Connection, part: list[str], out: dict[str, ChunkHit]) -> None:
    for r in db.execute(_RESOLVE_SQL.format(marks=",".join("?" * len(part))), part):
        out[r[0]] = ChunkHit(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9])


class Catalog:
    """The SQLite catalog at DIR/context/catalog.sqlite3; safe to use from many threads."""

    def __init__(self, context_dir: Path, root: Path) -> None:
        """Open (creating or upgrading) the catalog.

        Raises:
            CatalogSchemaError: the file was written by a newer ivoai (it is left exactly as it was).
            UnsafePathError: the directory or file is a symlink, foreign-owned or loosely permissioned.
        """
        self.path = sqlite.prepare_file(root, context_dir / CATALOG_FILE)
        MIGRATIONS.refuse_newer_file(self.path, timeout_seconds=BUSY_TIMEOUT_SECONDS)
        pragmas = sqlite.Pragmas(busy_timeout_seconds=BUSY_TIMEOUT_SECONDS, foreign_keys=True)
        self._pool = sqlite.ConnectionPool(self.path, pragmas, row_factory=sqlite3.Row)
        try:
            MIGRATIONS.migrate(self._db())
        except BaseException:
            self._pool.close()
            raise

    def _db(self) -> sqlite3.Connection:
        return self._pool.connection()

    def tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One IMMEDIATE transaction (writers serialise; readers keep reading the last commit)."""
        return self._pool.write()

    def close(self) -> None:
        """Close every thread's connection (a later call opens new ones)."""
        self._pool.close()

    # --------------------------------------------------------------------------------- connectors
    def add_connector(
        self, name: str, type_: str, path: str, options: dict[str, Any] | None = None
    ) -> ConnectorRow:
        """Insert a connector definition with its options (no credentials are ever stored)."""
        now = time.time()
        with self.tx() as db:
            if db.execute("SELECT 1 FROM connectors WHERE name=?", (name,)).fetchone():
                raise ConnectorExistsError(
                    f"connector {name!r} already exists; remove it first or pick another --name"
                )
            db.execute(
                "INSERT INTO connectors(name, type, path, created_at, metadata) VALUES(?,?,?,?,?)",
                (name, type_, path, now, json.dumps(options or {}, sort_keys=True)),
            )
        return ConnectorRow(name, type_, path, now, "active")

    def connectors(self) -> list[ConnectorRow]:
        """Every connector, by name."""
        rows = (
            self._db()
            .execute("SELECT name, type, path, created_at, state FROM connectors ORDER BY name")
            .fetchall()
        )
        return [ConnectorRow(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def connector(self, name: str) -> ConnectorRow:
        """One connector.

        Raises:
            ConnectorNotFoundError: no connector has that name.
        """
        r = (
            self._db()
            .execute("SELECT name, type, path, created_at, state FROM connectors WHERE name=?", (name,))
            .fetchone()
        )
        if r is None:
            raise ConnectorNotFoundError(f"no connector named {name!r} (see `ivoai server connector list`)")
        return ConnectorRow(r[0], r[1], r[2], r[3], r[4])

    def mark_removing(self, name: str) -> None:
        """First step of removal: ingestion stops writing for this connector from now on."""
        with self.tx() as db:
            cur = db.execute("UPDATE connectors SET state='removing' WHERE name=?", (name,))
            if cur.rowcount == 0:
                raise ConnectorNotFoundError(
                    f"no connector named {name!r} (see `ivoai server connector list`)"
                )

    def purge_connector(self, name: str) -> None:
        """Last step of removal: drop its documents, chunks and skip list, then its definition."""
        with self.tx() as db:
            db.execute("DELETE FROM documents WHERE connector=?", (name,))
            db.execute("DELETE FROM skipped WHERE connector=?", (name,))
            db.execute("DELETE FROM connectors WHERE name=?", (name,))

    def connector_active(self, db: sqlite3.Connection, name: str) -> bool:
        r = db.execute("SELECT state FROM connectors WHERE name=?", (name,)).fetchone()
        return r is not None and r[0] == "active"

    # ---------------------------------------------------------------------------------- documents
    def known_documents(self, connector: str) -> dict[str, KnownDocument]:
        """path -> (document ID, content hash, chunk IDs) for one connector."""
        db = self._db()
        docs = db.execute(
            "SELECT document_id, path, content_hash FROM documents WHERE connector=?", (connector,)
        ).fetchall()
        chunks: dict[str, set[str]] = {}
        for cid, did in db.execute(
            "SELECT c.chunk_id, c.document_id FROM chunks c JOIN documents d USING(document_id)"
            " WHERE d.connector=?",
            (connector,),
        ):
            chunks.setdefault(did, set()).add(cid)
        return {r[1]: KnownDocument(r[0], r[2], frozenset(chunks.get(r[0], ()))) for r in docs}

    def existing_chunk_ids(self, ids: Iterable[str]) -> set[str]:
        """Which of `ids` the catalog already has (their vectors are in the index already)."""
        out: set[str] = set()
        batch = list(ids)
        db = self._db()
        for i in range(0, len(batch), 500):
            part = batch[i : i + 500]
            q = f"SELECT chunk_id FROM chunks WHERE chunk_id IN ({','.join('?' * len(part))})"
            out.update(r[0] for r in db.execute(q, part))
        return out

    def commit_documents(self, connector: str, docs: Sequence[DocumentRecord]) -> set[str] | None:
        """Replace these documents and their chunks in one transaction; return the stale chunk IDs.

        Returns None (and writes nothing) when the connector was removed meanwhile.
        """
        now = time.time()
        stale: set[str] = set()
        with self.tx() as db:
            if not self.connector_active(db, connector):
                return None
            for d in docs:
                old = dict(
                    db.execute("SELECT chunk_id, dense FROM chunks WHERE document_id=?", (d.document_id,))
                )
                new = {c.chunk_id for c in d.chunks}
                stale |= set(old) - new
                prev = db.execute(
                    "SELECT first_seen FROM documents WHERE document_id=?", (d.document_id,)
                ).fetchone()
                first_seen = prev[0] if prev else now
                db.execute("DELETE FROM chunks WHERE document_id=?", (d.document_id,))
                db.execute(
                    "INSERT OR REPLACE INTO documents(document_id, connector, path, size, content_hash,"
                    " mtime, first_seen, updated_at, metadata, body) VALUES(?,?,?,?,?,?,?,?,?,?)",
                    (
                        d.document_id,
                        connector,
                        d.path,
                        d.size,
                        d.content_hash,
                        d.mtime,
                        first_seen,
                        now,
                        json.dumps(d.metadata, sort_keys=True),
                        d.body,
                    ),
                )
                # a kept chunk keeps its point, and with it a dense vector it already has
                db.executemany(
                    "INSERT OR REPLACE INTO chunks(chunk_id, document_id, idx, start, end, dense)"
                    " VALUES(?,?,?,?,?,?)",
                    [
                        (
                            c.chunk_id,
                            d.document_id,
                            c.index,
                            c.start,
                            c.end,
                            DENSE_EMBEDDED if old.get(c.chunk_id) == DENSE_EMBEDDED else c.dense,
                        )
                        for c in d.chunks
                    ],
                )
                db.execute("DELETE FROM skipped WHERE connector=? AND path=?", (connector, d.path))
        return stale

    def delete_documents(self, connector: str, paths: Sequence[str]) -> set[str]:
        """Remove documents that disappeared from the source; return their chunk IDs."""
        gone: set[str] = set()
        with self.tx() as db:
            for p in paths:
                r = db.execute(
                    "SELECT document_id FROM documents WHERE connector=? AND path=?", (connector, p)
                ).fetchone()
                if r is None:
                    continue
                gone.update(
                    x[0] for x in db.execute("SELECT chunk_id FROM chunks WHERE document_id=?", (r[0],))
                )
                db.execute("DELETE FROM documents WHERE document_id=?", (r[0],))
        return gone

    def record_skipped(self, connector: str, skipped: Sequence[tuple[str, str]]) -> None:
        """Replace the connector's skip list with this run's (path, reason) pairs."""
        with self.tx() as db:
            db.execute("DELETE FROM skipped WHERE connector=?", (connector,))
            db.executemany(
                "INSERT OR REPLACE INTO skipped(connector, path, reason) VALUES(?,?,?)",
                [(connector, p, r) for p, r in skipped],
            )

    def skipped(self, connector: str | None = None) -> list[tuple[str, str, str]]:
        """(connector, path, reason) of files the last runs skipped."""
        q = "SELECT connector, path, reason FROM skipped"
        args: tuple[str, ...] = ()
        if connector:
            q += " WHERE connector=?"
            args = (connector,)
        return [(r[0], r[1], r[2]) for r in self._db().execute(q + " ORDER BY connector, path", args)]

    def all_chunk_ids(self) -> set[str]:
        """Every chunk ID the catalog knows (the index must hold exactly these)."""
        return {r[0] for r in self._db().execute("SELECT chunk_id FROM chunks")}

    def resolve_chunks(self, ids: Sequence[str]) -> dict[str, ChunkHit]:
        """Chunk text and source metadata for point IDs; IDs the catalog does not know are absent.

        Each batch of IDs comes back as ONE row (a JSON array, in the join's row order), not one row
        per chunk: the sqlite3 module releases and re-takes the GIL around every step, and under
        concurrent searches every re-take waits behind the event loop and the other worker threads
        (at 64 clients iterating these rows was half of context_search's samples). `updated_at`
        travels as a 17-significant-digit string, which round-trips a double of this magnitude; a
        batch holding a value outside `sqlite.EXACT_REAL_RANGE` is read row by row instead.
        """
        out: dict[str, ChunkHit] = {}
        db = self._db()
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            inner = _RESOLVE_SQL.format(marks=",".join("?" * len(part)))
            rows = sqlite.unpack(
                db.execute(f"SELECT {_RESOLVE_AS_ONE_ROW} FROM ({inner})", part).fetchone()[0]
            )
            if any(r[8] is None for r in rows):  # a timestamp the packed form cannot carry exactly
                _resolve_rows(db, part, out)
                continue
            for r in rows:
                out[r[0]] = ChunkHit(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], float(r[8]), r[9])
        return out

    def resolve_chunks_by_row(self, ids: Sequence[str]) -> dict[str, ChunkHit]:
        """`resolve_chunks` one row per chunk (the reference the packed form is tested against)."""
        out: dict[str, ChunkHit] = {}
        db = self._db()
        for i in range(0, len(ids), 500):
            _resolve_rows(db, list(ids[i : i + 500]), out)
        return out

    def chunks_of(self, document_id: str) -> list[ChunkHit]:
        """All chunks of a document in order (used by merge and rebuild)."""
        q = (
            "SELECT c.chunk_id, c.document_id, d.connector, d.path, c.idx, c.start, c.end,"
            " substr(d.body, c.start + 1, c.end - c.start), d.updated_at, c.dense"
            " FROM chunks c JOIN documents d USING(document_id) WHERE c.document_id=? ORDER BY c.idx"
        )
        return [ChunkHit(*tuple(r)) for r in self._db().execute(q, (document_id,))]

    def document(self, document_id: str) -> sqlite3.Row | None:
        """One document row with its body, or None."""
        row: sqlite3.Row | None = (
            self._db()
            .execute(
                "SELECT d.* ,"
                " (SELECT count(*) FROM chunks c WHERE c.document_id = d.document_id) AS chunk_count"
                " FROM documents d JOIN connectors k ON k.name = d.connector AND k.state='active'"
                " WHERE d.document_id=?",
                (document_id,),
            )
            .fetchone()
        )
        return row

    def recent(self, limit: int) -> list[sqlite3.Row]:
        """The most recently changed documents, without bodies."""
        return (
            self._db()
            .execute(
                "SELECT d.document_id, d.connector, d.path, d.size, d.content_hash, d.mtime, d.first_seen,"
                " d.updated_at, d.metadata,"
                " (SELECT count(*) FROM chunks c WHERE c.document_id = d.document_id) AS chunk_count"
                " FROM documents d JOIN connectors k ON k.name = d.connector AND k.state='active'"
                " ORDER BY d.updated_at DESC, d.document_id LIMIT ?",
                (limit,),
            )
            .fetchall()
        )

    def iter_documents(self) -> Iterator[tuple[str, str, str, str]]:
        """(document_id, connector, path, body) of every document, in a stable order."""
        ids = [r[0] for r in self._db().execute("SELECT document_id FROM documents ORDER BY document_id")]
        for did in ids:
            r = (
                self._db()
                .execute(
                    "SELECT document_id, connector, path, body FROM documents WHERE document_id=?", (did,)
                )
                .fetchone()
            )
            if r is not None:
                yield r[0], r[1], r[2], r[3]

    def counts(self) -> dict[str, int]:
        """documents, chunks, connectors, bytes."""
        db = self._db()
        docs, size = db.execute("SELECT count(*), coalesce(sum(size), 0) FROM documents").fetchone()
        return {
            "connectors": int(db.execute("SELECT count(*) FROM connectors").fetchone()[0]),
            "documents": int(docs),
            "chunks": int(db.execute("SELECT count(*) FROM chunks").fetchone()[0]),
            "bytes": int(size),
        }

    def connector_counts(self, name: str) -> tuple[int, int]:
        """(documents, bytes) of one connector."""
        r = (
            self._db()
            .execute("SELECT count(*), coalesce(sum(size), 0) FROM documents WHERE connector=?", (name,))
            .fetchone()
        )
        return int(r[0]), int(r[1])

    # ------------------------------------------------------------------------------ dense coverage
    def pending_chunks(self, limit: int, connector: str | None = None) -> list[PendingChunk]:
        """Up to `limit` chunks of active connectors still lacking their dense vector, in write order
        (documents in path order, chunks in order, so documents complete one after another)."""
        q = (
            "SELECT c.chunk_id, c.document_id, d.connector, d.path, c.idx,"
            " substr(d.body, c.start + 1, c.end - c.start)"
            " FROM chunks c JOIN documents d USING(document_id)"
            " JOIN connectors k ON k.name = d.connector AND k.state = 'active'"
            " WHERE c.dense != 1 AND c.dense = 0"  # `!= 1` lets SQLite use the partial index
            + (" AND d.connector = ?" if connector else "")
            + " ORDER BY c.rowid LIMIT ?"
        )
        args: tuple[Any, ...] = (connector, limit) if connector else (limit,)
        return [PendingChunk(*tuple(r)) for r in self._db().execute(q, args)]

    def live_pending(self, db: sqlite3.Connection, ids: Sequence[str]) -> set[str]:
        """Which of `ids` are still pending chunks of active connectors (inside the caller's transaction)."""
        out: set[str] = set()
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            out.update(
                r[0]
                for r in db.execute(
                    "SELECT c.chunk_id FROM chunks c JOIN documents d USING(document_id)"
                    " JOIN connectors k ON k.name = d.connector AND k.state = 'active'"
                    f" WHERE c.dense = 0 AND c.chunk_id IN ({','.join('?' * len(part))})",
                    part,
                )
            )
        return out

    def overview_chunks(
        self, connector: str | None, path_prefix: str | None, limit: int = 200
    ) -> list[tuple[str, str, int]]:
        """(chunk ID, path, chunk index) of the first two chunks of READMEs and docs pages (active
        connectors; optionally one connector and below one directory): candidates for questions
        about a project as a whole."""
        q = (
            "SELECT c.chunk_id, d.path, c.idx FROM chunks c JOIN documents d USING(document_id)"
            " JOIN connectors k ON k.name = d.connector AND k.state = 'active'"
            " WHERE c.idx <= 1 AND (lower(d.path) LIKE 'readme%' OR lower(d.path) LIKE '%/readme%'"
            " OR d.path LIKE 'docs/%' OR d.path LIKE 'doc/%' OR d.path LIKE 'documentation/%')"
        )
        args: list[Any] = []
        if connector:
            q += " AND d.connector = ?"
            args.append(connector)
        if path_prefix:
            q += " AND (d.path = ? OR substr(d.path, 1, ?) = ?)"
            args.extend([path_prefix, len(path_prefix) + 1, path_prefix + "/"])
        q += " ORDER BY d.path, c.idx LIMIT ?"
        args.append(limit)
        return [(r[0], r[1], int(r[2])) for r in self._db().execute(q, args)]

    def mark_embedded(self, db: sqlite3.Connection, ids: Sequence[str]) -> None:
        """Record that these chunks' points have their dense vector (inside the caller's transaction)."""
        db.executemany("UPDATE chunks SET dense=1 WHERE chunk_id=?", [(i,) for i in ids])

    def not_embedded(self, ids: Sequence[str]) -> dict[str, int]:
        """chunk ID -> DENSE_PENDING | DENSE_LEXICAL_ONLY for those of `ids` without a dense vector."""
        out: dict[str, int] = {}
        db = self._db()
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            out.update(
                db.execute(
                    "SELECT chunk_id, dense FROM chunks WHERE dense != 1"
                    f" AND chunk_id IN ({','.join('?' * len(part))})",
                    part,
                ).fetchall()
            )
        return out

    def coverage(self, connector: str | None = None) -> Coverage:
        """Chunk counts by dense state (every connector, or one)."""
        db = self._db()
        if connector is None:  # the partial index holds only the chunks without a dense vector
            total = int(db.execute("SELECT count(*) FROM chunks").fetchone()[0])
            counts = dict(
                db.execute("SELECT dense, count(*) FROM chunks WHERE dense != 1 GROUP BY dense").fetchall()
            )
            docs = db.execute(
                "SELECT count(DISTINCT document_id) FROM chunks WHERE dense != 1 AND dense = 0"
            ).fetchone()[0]
        else:
            base = " FROM chunks c JOIN documents d USING(document_id) WHERE d.connector = ?"
            counts = dict(db.execute("SELECT c.dense, count(*)" + base + " GROUP BY c.dense", (connector,)))
            total = sum(int(v) for v in counts.values())
            docs = db.execute(
                "SELECT count(DISTINCT c.document_id)" + base + " AND c.dense = 0", (connector,)
            ).fetchone()[0]
        pending = int(counts.get(DENSE_PENDING, 0))
        lexical = int(counts.get(DENSE_LEXICAL_ONLY, 0))
        return Coverage(total, total - pending - lexical, pending, lexical, int(docs))

    def lexical_only_summary(self, connector: str | None = None) -> dict[str, dict[str, int]]:
        """reason -> {documents, chunks} for documents indexed lexically only by rule."""
        q = (
            "SELECT json_extract(d.metadata, '$.lexical_only') AS reason, count(DISTINCT d.document_id),"
            " count(c.chunk_id) FROM documents d LEFT JOIN chunks c USING(document_id)"
            " WHERE json_extract(d.metadata, '$.lexical_only') IS NOT NULL"
            + (" AND d.connector = ?" if connector else "")
            + " GROUP BY reason ORDER BY reason"
        )
        args: tuple[str, ...] = (connector,) if connector else ()
        return {r[0]: {"documents": int(r[1]), "chunks": int(r[2])} for r in self._db().execute(q, args)}

    # ------------------------------------------------------------------------- connector options
    def connector_options(self, name: str) -> dict[str, Any]:
        """The connector's options (`embed_generated`), from its metadata column."""
        r = self._db().execute("SELECT metadata FROM connectors WHERE name=?", (name,)).fetchone()
        if r is None:
            raise ConnectorNotFoundError(f"no connector named {name!r} (see `ivoai server connector list`)")
        loaded = json.loads(r[0] or "{}")
        return loaded if isinstance(loaded, dict) else {}

    def set_embed_generated(self, name: str, embed: bool) -> int:
        """Set the connector's `embed_generated` option and move its rule-based lexical-only chunks
        to pending (embed) or back (not yet embedded ones only); returns how many chunks changed."""
        with self.tx() as db:
            r = db.execute("SELECT metadata FROM connectors WHERE name=?", (name,)).fetchone()
            if r is None:
                raise ConnectorNotFoundError(
                    f"no connector named {name!r} (see `ivoai server connector list`)"
                )
            meta = json.loads(r[0] or "{}")
            meta["embed_generated"] = embed
            db.execute(
                "UPDATE connectors SET metadata=? WHERE name=?", (json.dumps(meta, sort_keys=True), name)
            )
            old, new = (DENSE_LEXICAL_ONLY, DENSE_PENDING) if embed else (DENSE_PENDING, DENSE_LEXICAL_ONLY)
            return int(
                db.execute(
                    "UPDATE chunks SET dense=? WHERE dense=? AND document_id IN (SELECT document_id FROM"
                    " documents WHERE connector=? AND json_extract(metadata, '$.lexical_only') IS NOT NULL)",
                    (new, old, name),
                ).rowcount
            )

    # --------------------------------------------------------------------------------------- runs
    def start_run(self, run_id: str, connector: str | None) -> None:
        pid, marker = own_marker()
        with self.tx() as db:
            db.execute(
                "INSERT INTO runs(run_id, started_at, status, connector, pid, pid_marker)"
                " VALUES(?,?,?,?,?,?)",
                (run_id, time.time(), "running", connector, pid, marker),
            )

    def finish_run(self, run_id: str, status: str, stats: dict[str, Any]) -> None:
        with self.tx() as db:
            db.execute(
                "UPDATE runs SET finished_at=?, status=?, stats=? WHERE run_id=?",
                (time.time(), status, json.dumps(stats, sort_keys=True), run_id),
            )

    def interrupted_runs(self) -> list[str]:
        """Runs that never finished (the process died); the next run repairs the index.

        Called with the ingestion lock held, so no `running` row belongs to a live run.
        """
        return [r[0] for r in self._db().execute("SELECT run_id FROM runs WHERE status='running'")]

    def last_run(self) -> dict[str, Any] | None:
        r = (
            self._db()
            .execute(
                "SELECT run_id, started_at, finished_at, status, connector, stats, pid, pid_marker FROM runs"
                " ORDER BY started_at DESC LIMIT 1"
            )
            .fetchone()
        )
        if r is None:
            return None
        status = r[3]
        if status == "running" and not (r[6] is not None and is_alive(int(r[6]), str(r[7]))):
            status = "interrupted"  # its process is gone (killed): the next run repairs and continues
        return {
            "run_id": r[0],
            "started_at": r[1],
            "finished_at": r[2],
            "status": status,
            "connector": r[4],
            "stats": json.loads(r[5]),
            "pid": r[6],
        }

    def get_meta(self, key: str) -> str | None:
        r = self._db().execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if r is None else str(r[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.tx() as db:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?,?)", (key, value))
