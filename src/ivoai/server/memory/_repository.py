"""The SQL of memory pages: every statement `MemoryService` runs, as functions over one connection.

The service owns the domain rules (validation, redaction, embedding, which limits apply) and the
transactions; each function here runs inside the transaction its caller opened and turns rows into
the service's models. Errors that name a missing page or a stale version are raised here because
only the rows can tell.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ivoai.common import sqlite
from ivoai.common.ids import sha256_hex
from ivoai.common.limits import MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS
from ivoai.server.memory import _ranking, _schema
from ivoai.server.memory._db import Connections
from ivoai.server.memory.errors import MemoryConflictError, MemoryNotFoundError, MemoryStoreError
from ivoai.server.memory.hooks import HookEvent, HookResult, SessionInfo, StoredEvent, session_page_path
from ivoai.server.memory.models import Frontmatter, Page, PageSummary, QueryHit, StatusResult

SNIPPET_TOKENS = 24
SNIPPET_FALLBACK_CHARS = 240
_HEAD_COLUMNS = (
    "id, workspace, project, path, version, deleted, title, tags, entities, kind, pinned, expires_at, "
    "created_at, updated_at, useful, not_useful"
)

_SIGNAL_COLUMNS = "p.id, p.pinned, p.updated_at, p.useful, p.not_useful"  # what fusion reads of a page
# The lexical candidates (up to 400) come back as ONE row, a JSON array in bm25 order (the aggregate
# reads the ordered, limited sub-query in order), not one row each: see `sqlite.packed` (at 64
# clients this query alone was ~30% of the gateway's samples). A REAL travels through
# `sqlite.exact_real`; a value it cannot carry comes back NULL and that page is read row by row.
_LEXICAL_AS_ONE_ROW = sqlite.packed(("id", "pinned", sqlite.exact_real("updated_at"), "useful", "not_useful"))
# The scope's vector-cache generations, as scalar sub-queries riding along in the same statement.
_GENERATION = "(SELECT gen FROM scope_generations WHERE workspace = ? AND project = ?)"
# What a hit shows of its page, plus its text for the snippet: the FTS snippet of a lexical match,
# else the start of the body (one statement and one row for every hit; see `hit_rows`).
_HIT_FIELDS = "p.workspace, p.project, p.path, p.version, p.title, p.tags, p.kind, p.pinned, p.updated_at"
_SNIPPET_TEXT = (
    f"CASE WHEN s.s IS NULL OR s.s = '' THEN substr(p.body, 1, {SNIPPET_FALLBACK_CHARS * 2}) ELSE s.s END"
)
_HIT_AS_ONE_ROW = sqlite.packed(
    ("p.id", *_HIT_FIELDS.split(", ")[:-1], sqlite.exact_real("p.updated_at"), _SNIPPET_TEXT)
)


def open_schema(connections: Connections) -> None:
    """Create or upgrade the database; a newer one is refused before anything writes to it.

    Raises:
        MemorySchemaError: the database is newer than this code or has a different history.
        MemoryStoreError: the file is not a usable SQLite database.
    """
    try:
        _schema.RUNNER.refuse_newer_file(connections.path, timeout_seconds=MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS)
        _schema.migrate(connections.get())
    except sqlite3.DatabaseError as exc:
        raise MemoryStoreError(f"memory database {connections.path} is unusable: {exc}") from None


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _row(cur: sqlite3.Cursor, row: Sequence[Any]) -> dict[str, Any]:
    return dict(zip(_columns(cur), row, strict=True))


def _columns(cur: sqlite3.Cursor) -> list[str]:
    return [d[0] for d in cur.description]


def head(conn: sqlite3.Connection, ws: str, pj: str, path: str) -> dict[str, Any] | None:
    """The page's current row without its body (None: the path never had a page)."""
    cur = conn.execute(
        f"SELECT {_HEAD_COLUMNS} FROM pages WHERE workspace = ? AND project = ? AND path = ?", (ws, pj, path)
    )
    row = cur.fetchone()
    return None if row is None else _row(cur, row)


def live_head(conn: sqlite3.Connection, ws: str, pj: str, path: str) -> dict[str, Any]:
    """The current row of a live page.

    Raises:
        MemoryNotFoundError: no page at that path, or it was deleted.
    """
    found = head(conn, ws, pj, path)
    if found is None or found["deleted"]:
        raise MemoryNotFoundError(f"no memory page {path!r} in {ws}/{pj}")
    return found


def summary(head: Mapping[str, Any], now: float) -> PageSummary:
    """A page row (without body) as the model the tools answer with."""
    expires = head["expires_at"]
    return PageSummary(
        workspace=head["workspace"],
        project=head["project"],
        path=head["path"],
        version=head["version"],
        title=head["title"],
        tags=json.loads(head["tags"]),
        entities=json.loads(head["entities"]),
        kind=head["kind"],
        pinned=bool(head["pinned"]),
        expires_at=None if expires is None else _dt(expires),
        expired=expires is not None and expires <= now,
        created_at=_dt(head["created_at"]),
        updated_at=_dt(head["updated_at"]),
        useful=head["useful"],
        not_useful=head["not_useful"],
    )


def _page(head: Mapping[str, Any], body: str, latest: int, now: float) -> Page:
    return Page(**summary(head, now).model_dump(), body=body, latest_version=latest)


# ------------------------------------------------------------------------------------ query


def lexical_candidates(
    conn: sqlite3.Connection, ws: str, projects: Sequence[str], now: float, expression: str | None, limit: int
) -> tuple[list[int], dict[int, _ranking.Signals], tuple[int, ...]]:
    """(page ids in bm25 order, their ranking signals, the scope's generations) for an FTS `expression`.

    The join reads each candidate's page row anyway: its ranking signals come along, as one JSON row
    (see `_LEXICAL_AS_ONE_ROW`), and the scope's generations with them. Without an expression only
    the generations are read.
    """
    gen_sql = ", ".join(_GENERATION for _ in projects)
    gen_args = [x for p in projects for x in (ws, p)]
    if expression is None:
        row = conn.execute(f"SELECT {gen_sql}", gen_args).fetchone()
        return [], {}, tuple(int(g or 0) for g in row)
    scope_sql = (
        f"p.workspace = ? AND p.project IN ({','.join('?' * len(projects))}) AND p.deleted = 0 "
        "AND (p.expires_at IS NULL OR p.expires_at > ?)"
    )
    packed = conn.execute(
        f"SELECT {_LEXICAL_AS_ONE_ROW}, {gen_sql} FROM (SELECT {_SIGNAL_COLUMNS} "
        "FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid "
        f"WHERE pages_fts MATCH ? AND {scope_sql} "
        f"ORDER BY bm25(pages_fts, {', '.join(map(str, _ranking.BM25_WEIGHTS))}) LIMIT ?)",
        [*gen_args, expression, ws, *projects, now, limit],
    ).fetchone()
    rows = sqlite.unpack(packed[0])
    found = signals([r for r in rows if r[2] is not None])
    found.update(signals_by_id(conn, [int(r[0]) for r in rows if r[2] is None]))
    return [int(r[0]) for r in rows], found, tuple(int(g or 0) for g in packed[1:])


@dataclass(frozen=True)
class HitRow:
    """What a query hit shows of its page; `text` is its snippet before whitespace is collapsed."""

    workspace: str
    project: str
    path: str
    version: int
    title: str
    tags: str
    kind: str
    pinned: int
    updated_at: float
    text: str

    def hit(self, score: float, match: _ranking.Match) -> QueryHit:
        """The hit as the tools answer it."""
        same = {
            name: getattr(self, name) for name in ("workspace", "project", "path", "version", "title", "kind")
        }
        return QueryHit(
            **same,
            tags=json.loads(self.tags),
            pinned=bool(self.pinned),
            updated_at=_dt(self.updated_at),
            score=round(score, 6),
            snippet=" ".join(self.text.split())[: SNIPPET_FALLBACK_CHARS * 2],
            match=match,
        )


def hit_rows(
    conn: sqlite3.Connection, expression: str | None, ids: Sequence[int], matched: Sequence[int]
) -> dict[int, HitRow]:
    """The hits' page fields and snippet texts in ONE statement and ONE row (see _LEXICAL_AS_ONE_ROW).

    A matched hit's text is its FTS snippet, any other's (or one with an empty snippet) the start of
    its body. Identical to `hit_rows_by_row`, which it falls back to for a timestamp it cannot pack.
    """
    if not ids:
        return {}
    if expression is not None and matched:
        # FTS5 refuses snippet() as an aggregate's argument; the LIMIT keeps the sub-query from
        # being flattened into the aggregate.
        fts = (
            f"SELECT rowid AS id, snippet(pages_fts, 2, '', '', '…', {SNIPPET_TOKENS}) AS s FROM pages_fts "
            f"WHERE pages_fts MATCH ? AND rowid IN ({','.join('?' * len(matched))}) LIMIT ?"
        )
        fts_args: list[Any] = [expression, *matched, len(matched)]
    else:
        fts, fts_args = "SELECT NULL AS id, NULL AS s LIMIT 0", []
    packed = conn.execute(
        f"SELECT {_HIT_AS_ONE_ROW} FROM pages p LEFT JOIN ({fts}) s ON s.id = p.id "
        f"WHERE p.id IN ({','.join('?' * len(ids))})",
        [*fts_args, *ids],
    ).fetchone()
    rows = sqlite.unpack(packed[0])
    if any(r[9] is None for r in rows):
        return hit_rows_by_row(conn, expression, ids, matched)
    return {
        int(r[0]): HitRow(r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], float(r[9]), r[10]) for r in rows
    }


def hit_rows_by_row(
    conn: sqlite3.Connection, expression: str | None, ids: Sequence[int], matched: Sequence[int]
) -> dict[int, HitRow]:
    """`hit_rows` one row and one statement per hit (the reference the packed form is tested against)."""
    out: dict[int, HitRow] = {}
    for pid in ids:
        head = conn.execute(f"SELECT {_HIT_FIELDS} FROM pages p WHERE p.id = ?", (pid,)).fetchone()
        if head is None:
            continue
        text: str | None = None
        if expression is not None and pid in matched:
            row = conn.execute(
                f"SELECT snippet(pages_fts, 2, '', '', '…', {SNIPPET_TOKENS}) FROM pages_fts "
                "WHERE pages_fts MATCH ? AND rowid = ?",
                (expression, pid),
            ).fetchone()
            text = None if row is None else row[0]
        if not text:
            body = conn.execute("SELECT body FROM pages WHERE id = ?", (pid,)).fetchone()[0]
            text = str(body)[: SNIPPET_FALLBACK_CHARS * 2]
        ws, pj, path, version, title, tags, kind, pinned, updated_at = head
        out[pid] = HitRow(ws, pj, path, version, title, tags, kind, pinned, updated_at, text)
    return out


def signals(rows: Sequence[Sequence[Any]]) -> dict[int, _ranking.Signals]:
    """Ranking signals by page id from `_SIGNAL_COLUMNS` rows, in row order."""
    return {
        int(pid): _ranking.Signals(bool(pinned), float(updated), int(useful), int(not_useful))
        for pid, pinned, updated, useful, not_useful in rows
    }


def signals_by_id(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, _ranking.Signals]:
    """Ranking signals of these pages, read row by row."""
    if not ids:
        return {}
    cur = conn.execute(
        f"SELECT {_SIGNAL_COLUMNS} FROM pages p WHERE p.id IN ({','.join('?' * len(ids))})", list(ids)
    )
    return signals(cur.fetchall())


# ------------------------------------------------------------------------------------ reads


def recent(conn: sqlite3.Connection, ws: str, pj: str, limit: int, now: float) -> list[PageSummary]:
    """The most recently updated live, unexpired pages of one scope."""
    rows = conn.execute(
        f"SELECT {_HEAD_COLUMNS} FROM pages WHERE workspace = ? AND project = ? AND deleted = 0 "
        "AND (expires_at IS NULL OR expires_at > ?) ORDER BY updated_at DESC, id DESC LIMIT ?",
        (ws, pj, now, limit),
    )
    names = _columns(rows)
    return [summary(dict(zip(names, r, strict=True)), now) for r in rows.fetchall()]


def read_page(conn: sqlite3.Connection, ws: str, pj: str, p: str, version: int | None, now: float) -> Page:
    """One page (its current version, or an older `version`) with body and metadata.

    Raises:
        MemoryNotFoundError: no such page, it was deleted, or no such version.
    """
    current = head(conn, ws, pj, p)
    if current is None:
        raise MemoryNotFoundError(f"no memory page {p!r} in {ws}/{pj}")
    if version is None or version == current["version"]:
        if current["deleted"]:
            raise MemoryNotFoundError(
                f"memory page {p!r} in {ws}/{pj} was deleted (version {current['version']})"
            )
        body = conn.execute("SELECT body FROM pages WHERE id = ?", (current["id"],)).fetchone()[0]
        return _page(current, body, current["version"], now)
    cur = conn.execute(
        "SELECT version, deleted, title, tags, entities, kind, pinned, expires_at, body, written_at "
        "FROM page_versions WHERE page_id = ? AND version = ?",
        (current["id"], version),
    )
    row = cur.fetchone()
    if row is None or row[1]:
        raise MemoryNotFoundError(f"memory page {p!r} in {ws}/{pj} has no readable version {version}")
    old = _row(cur, row)
    merged = dict(current)
    merged.update(old)
    merged["updated_at"] = old["written_at"]
    return _page(merged, old["body"], current["version"], now)


def page_batch(
    conn: sqlite3.Connection, ws: str | None, pj: str | None, after: tuple[str, str, str], now: float
) -> list[Page]:
    """Up to 200 live pages (expired ones included) after `after` in (workspace, project, path) order."""
    cur = conn.execute(
        f"SELECT {_HEAD_COLUMNS}, body FROM pages WHERE deleted = 0 "
        "AND (? IS NULL OR workspace = ?) AND (? IS NULL OR project = ?) "
        "AND (workspace, project, path) > (?, ?, ?) ORDER BY workspace, project, path LIMIT 200",
        (ws, ws, pj, pj, *after),
    )
    names = _columns(cur)
    heads = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    return [_page(h, h["body"], h["version"], now) for h in heads]


def status(conn: sqlite3.Connection, embedder: str | None, path: str) -> StatusResult:
    """Counts, database size, schema version and the time of the last write."""

    def one(sql: str) -> int:
        return int(conn.execute(sql).fetchone()[0] or 0)

    version = _schema.current_version(conn)
    last = conn.execute("SELECT value FROM meta WHERE key = 'last_write_at'").fetchone()
    return StatusResult(
        schema_version=version,
        schema_name=_schema.MIGRATIONS[version - 1].name,
        pages=one("SELECT count(*) FROM pages WHERE deleted = 0"),
        deleted_pages=one("SELECT count(*) FROM pages WHERE deleted = 1"),
        versions=one("SELECT count(*) FROM pages") + one("SELECT count(*) FROM page_versions"),
        scopes=one("SELECT count(*) FROM (SELECT DISTINCT workspace, project FROM pages WHERE deleted = 0)"),
        hook_events=one("SELECT count(*) FROM hook_events"),
        sessions=one("SELECT count(*) FROM hook_sessions"),
        embedded_pages=one("SELECT count(*) FROM page_vectors"),
        embedder=embedder,
        database_bytes=_file_bytes(path),
        last_write_at=_dt(float(last[0])) if last else None,
    )


def _file_bytes(db_path: str) -> int:
    total = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(FileNotFoundError):
            total += os.stat(db_path + suffix).st_size
    return total


# ----------------------------------------------------------------------------------- writes


def _archive(conn: sqlite3.Connection, page_id: int) -> None:
    conn.execute(
        "INSERT INTO page_versions (page_id, version, deleted, title, tags, entities, kind, pinned, "
        "expires_at, body, written_at) SELECT id, version, deleted, title, tags, entities, kind, pinned, "
        "expires_at, body, updated_at FROM pages WHERE id = ?",
        (page_id,),
    )


def _touch(conn: sqlite3.Connection, now: float) -> None:
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_write_at', ?)", (repr(now),))


def _refuse_stale(found: Mapping[str, Any] | None, where: str, expected_version: int | None) -> None:
    live = 0 if found is None or found["deleted"] else int(found["version"])
    if expected_version is None or expected_version == live:
        return
    if found is None:
        current = "absent"
    elif found["deleted"]:
        current = f"deleted at version {found['version']}"
    else:
        current = f"version {found['version']}"
    raise MemoryConflictError(
        f"memory page {where}: expected version {expected_version}, but it is {current}; "
        "re-read the page and retry"
    )


def write_version(
    conn: sqlite3.Connection,
    scope: tuple[str, str, str],
    body: str,
    fm: Frontmatter | None,
    default_title: Callable[[], str],
    expected_version: int | None,
    now: float,
) -> tuple[int, bool]:
    """Check the version and write the new head of the page at `scope` (workspace, project, path).

    `fm=None` keeps a live page's metadata (a new or deleted one gets the defaults); `default_title()`
    stands in for an empty title. Returns (version, created).

    Raises:
        MemoryConflictError: `expected_version` is not the current version (0: the page must not exist).
    """
    ws, pj, path = scope
    found = head(conn, ws, pj, path)
    _refuse_stale(found, f"{path!r} in {ws}/{pj}", expected_version)
    if fm is None and found is not None and not found["deleted"]:
        meta = tuple(found[k] for k in ("title", "tags", "entities", "kind", "pinned", "expires_at"))
    else:
        fm = fm or Frontmatter()
        expires = None if fm.expires_at is None else fm.expires_at.timestamp()
        meta = (
            fm.title or default_title(),
            json.dumps(fm.tags),
            json.dumps(fm.entities),
            fm.kind,
            int(fm.pinned),
            expires,
        )
    if found is None:
        conn.execute(
            "INSERT INTO pages (workspace, project, path, version, deleted, title, tags, entities, kind, "
            "pinned, expires_at, body, created_at, updated_at) "
            "VALUES (?, ?, ?, 1, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (ws, pj, path, *meta, body, now, now),
        )
        version, created = 1, True
    else:
        _archive(conn, found["id"])
        version, created = int(found["version"]) + 1, bool(found["deleted"])
        conn.execute(
            "UPDATE pages SET version = ?, deleted = 0, title = ?, tags = ?, entities = ?, kind = ?, "
            "pinned = ?, expires_at = ?, body = ?, updated_at = ?, "
            "created_at = CASE WHEN deleted = 1 THEN ? ELSE created_at END "
            "WHERE id = ?",
            (version, *meta, body, now, now, found["id"]),
        )
    _touch(conn, now)
    return version, created


def add_feedback(
    conn: sqlite3.Connection, page: Mapping[str, Any], useful: bool, note: str | None, now: float
) -> tuple[int, int]:
    """Count one verdict on the live `page` (a `head` row); returns its (useful, not_useful) counters."""
    column = "useful" if useful else "not_useful"
    conn.execute(f"UPDATE pages SET {column} = {column} + 1 WHERE id = ?", (page["id"],))
    conn.execute(
        "INSERT INTO page_feedback (page_id, version, useful, note, at) VALUES (?, ?, ?, ?, ?)",
        (page["id"], page["version"], int(useful), note, now),
    )
    counts = conn.execute("SELECT useful, not_useful FROM pages WHERE id = ?", (page["id"],)).fetchone()
    return int(counts[0]), int(counts[1])


def tombstone(conn: sqlite3.Connection, page_id: int, now: float) -> None:
    """Write a deleted version of the page (its history is kept; its vector is dropped)."""
    _archive(conn, page_id)
    conn.execute(
        "UPDATE pages SET version = version + 1, deleted = 1, title = '', body = '', tags = '[]', "
        "entities = '[]', pinned = 0, expires_at = NULL, updated_at = ? WHERE id = ?",
        (now, page_id),
    )
    conn.execute("DELETE FROM page_vectors WHERE page_id = ?", (page_id,))
    _touch(conn, now)


# ---------------------------------------------------------------------------------- vectors


def store_vector(
    conn: sqlite3.Connection,
    scope: tuple[str, str, str],
    version: int,
    model: str | None,
    vector: list[float] | None,
) -> None:
    """Record the vector of the page's `version` (without a model or vector: drop its old one)."""
    found = head(conn, *scope)
    assert found is not None
    if vector is None or model is None:
        conn.execute("DELETE FROM page_vectors WHERE page_id = ?", (found["id"],))
        return
    conn.execute(
        "INSERT OR REPLACE INTO page_vectors (page_id, version, model, dims, vec) VALUES (?, ?, ?, ?, ?)",
        (found["id"], version, model, len(vector), array("f", vector).tobytes()),
    )


_MISSING_VECTOR = (
    "FROM pages p LEFT JOIN page_vectors v ON v.page_id = p.id "
    "WHERE p.deleted = 0 AND (v.page_id IS NULL OR v.version != p.version OR v.model != ?)"
)


def pages_without_vector(conn: sqlite3.Connection, model: str, limit: int) -> list[tuple[int, int, str, str]]:
    """(id, version, title, body) of up to `limit` live pages lacking a current vector of `model`."""
    rows = conn.execute(
        f"SELECT p.id, p.version, p.title, p.body {_MISSING_VECTOR} ORDER BY p.id LIMIT ?", (model, limit)
    ).fetchall()
    return [(int(r[0]), int(r[1]), str(r[2]), str(r[3])) for r in rows]


def count_without_vector(conn: sqlite3.Connection, model: str) -> int:
    """How many live pages lack a current vector of `model`."""
    return int(conn.execute(f"SELECT count(*) {_MISSING_VECTOR}", (model,)).fetchone()[0] or 0)


def store_vectors(
    conn: sqlite3.Connection, model: str, items: Sequence[tuple[tuple[int, int], Sequence[float]]]
) -> None:
    """Record ((page id, version), vector) pairs; a page written since keeps no stale vector."""
    for (pid, version), vec in items:
        conn.execute(
            "INSERT OR REPLACE INTO page_vectors (page_id, version, model, dims, vec) "
            "SELECT id, version, ?, ?, ? FROM pages WHERE id = ? AND version = ?",
            (model, len(vec), array("f", list(vec)).tobytes(), pid, version),
        )


# ------------------------------------------------------------------------------ hook intake


def record_event(
    conn: sqlite3.Connection,
    event: HookEvent,
    scope: tuple[str, str],
    found: list[str],
    times: tuple[float, float],
    max_events: int,
    touched: dict[int, None],
) -> HookResult:
    """Store one redacted event unless its key was seen; returns its result (version = session row).

    `times` is (the event's time, now); a session past `max_events` stored events counts the event
    as dropped but keeps its key, so a retry stays a duplicate.
    """
    ws, pj = scope
    at, now = times
    data = event.model_dump_json()
    digest = sha256_hex(event.model_dump_json(exclude={"idempotency_key"}))
    seen = conn.execute(
        "SELECT 1 FROM hook_events WHERE workspace = ? AND idempotency_key = ?", (ws, event.idempotency_key)
    ).fetchone()
    if seen is not None:
        return HookResult(idempotency_key=event.idempotency_key, status="duplicate", workspace=ws, project=pj)
    row_id, path = _session_row(conn, event, ws, pj, at)
    stored = conn.execute(
        "SELECT count(*) FROM hook_events WHERE session_row = ? AND data != ''", (row_id,)
    ).fetchone()
    if int(stored[0]) >= max_events:
        conn.execute("UPDATE hook_sessions SET dropped_events = dropped_events + 1 WHERE id = ?", (row_id,))
        data = ""  # the key is kept so a retry stays a duplicate; the content is not
    conn.execute(
        "INSERT INTO hook_events (workspace, idempotency_key, session_row, at, received_at, digest, data) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (ws, event.idempotency_key, row_id, at, now, digest, data),
    )
    touched[row_id] = None
    return HookResult(
        idempotency_key=event.idempotency_key,
        status="applied",
        workspace=ws,
        project=pj,
        path=path,
        version=row_id,
        redacted=found,
    )


def _session_row(conn: sqlite3.Connection, event: HookEvent, ws: str, pj: str, at: float) -> tuple[int, str]:
    session = conn.execute(
        "SELECT id, path FROM hook_sessions WHERE workspace = ? AND project = ? AND session_id = ?",
        (ws, pj, event.session_id),
    ).fetchone()
    if session is not None:
        return int(session[0]), str(session[1])
    path = session_page_path(event.session_id, at)
    cur = conn.execute(
        "INSERT INTO hook_sessions (workspace, project, session_id, path, agent, first_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (ws, pj, event.session_id, path, event.agent, at),
    )
    return int(cur.lastrowid or 0), path


def session(conn: sqlite3.Connection, row_id: int) -> tuple[SessionInfo, str, list[StoredEvent]]:
    """One session's facts, its page path and its stored events in order."""
    ws, pj, session_id, path, agent, first_at, dropped = conn.execute(
        "SELECT workspace, project, session_id, path, agent, first_at, dropped_events "
        "FROM hook_sessions WHERE id = ?",
        (row_id,),
    ).fetchone()
    rows = conn.execute(
        "SELECT at, idempotency_key, data FROM hook_events WHERE session_row = ? AND data != '' "
        "ORDER BY at, idempotency_key",
        (row_id,),
    ).fetchall()
    # Stored events were validated on intake; redaction may have changed lengths, so no re-validation.
    events = [
        StoredEvent(at=float(at), idempotency_key=key, event=HookEvent.model_construct(**json.loads(data)))
        for at, key, data in rows
    ]
    return SessionInfo(ws, pj, session_id, agent, float(first_at), int(dropped)), path, events


def trim_session_page(conn: sqlite3.Connection, scope: tuple[str, str, str], keep_before: int) -> None:
    """Drop a session page's versions numbered `keep_before` or lower, and its vector."""
    page_id = conn.execute(
        "SELECT id FROM pages WHERE workspace = ? AND project = ? AND path = ?", scope
    ).fetchone()[0]
    conn.execute("DELETE FROM page_versions WHERE page_id = ? AND version <= ?", (page_id, keep_before))
    conn.execute("DELETE FROM page_vectors WHERE page_id = ?", (page_id,))
