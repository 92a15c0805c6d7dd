"""MemoryService: durable, versioned Markdown pages for agents, with ranking and hook intake.

Transport-free and synchronous; safe to call from several threads (one SQLite connection per
thread, WAL, busy timeout, immediate write transactions) and from several processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ivoai.common.errors import IvoaiError
from ivoai.common.ids import sha256_hex
from ivoai.common.limits import (
    MEMORY_BODY_MAX_BYTES,
    MEMORY_EMBED_MAX_CHARS,
    MEMORY_FEEDBACK_NOTE_MAX_CHARS,
    MEMORY_HOOK_BATCH_MAX_EVENTS,
    MEMORY_HOOK_EVENT_MAX_BYTES,
    MEMORY_QUERY_MAX_CHARS,
    MEMORY_QUERY_MAX_RESULTS,
    MEMORY_RECENT_MAX_RESULTS,
    MEMORY_SESSION_HISTORY_MAX_VERSIONS,
    MEMORY_SESSION_MAX_EVENTS,
    MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS,
    MEMORY_TITLE_MAX_CHARS,
)
from ivoai.common.redact import find_secrets, redact
from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory import _ranking, _schema
from ivoai.server.memory._db import Connections, guard, prepare_file
from ivoai.server.memory._names import (
    DEFAULT_PROJECT,
    DEFAULT_WORKSPACE,
    GLOBAL_PROJECT,
    normalize_path,
    validate_project,
    validate_workspace,
)
from ivoai.server.memory._vectors import VectorCache
from ivoai.server.memory.errors import (
    MemoryConfirmError,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryStoreError,
    MemoryTooLargeError,
    MemoryValidationError,
)
from ivoai.server.memory.hooks import (
    HookBatch,
    HookBatchResult,
    HookEvent,
    HookResult,
    SessionInfo,
    StoredEvent,
    redact_event,
    render_session,
    resolve_project,
    session_page_path,
)
from ivoai.server.memory.models import (
    DeleteResult,
    FeedbackResult,
    Frontmatter,
    Page,
    PageSummary,
    QueryHit,
    QueryResult,
    RecentResult,
    StatusResult,
    WriteResult,
    parse_model,
)

if TYPE_CHECKING:
    from ivoai.server.context.embeddings import Embedder

CLOCK_SKEW_ALLOWED_SECONDS = 300.0  # a hook event stamped further ahead than this gets the server's time
SNIPPET_TOKENS = 24
SNIPPET_FALLBACK_CHARS = 240
_HEAD_COLUMNS = (
    "id, workspace, project, path, version, deleted, title, tags, entities, kind, pinned, expires_at, "
    "created_at, updated_at, useful, not_useful"
)

_SIGNAL_COLUMNS = "p.id, p.pinned, p.updated_at, p.useful, p.not_useful"  # what fusion reads of a page
# SQLite's printf('%!.17g') round-trips every double tested below 1e100 (it formats through long
# double; errors appear far above that); a value outside this range travels as NULL and is then read
# row by row, so packed rows are always exact. Timestamps are ~1e9.
_EXACT_FLOAT_RANGE = 1e15


def _exact_text(column: str) -> str:
    """SQL: `column` (a REAL) as a decimal string that round-trips through float(), or NULL."""
    return f"CASE WHEN abs({column}) < {_EXACT_FLOAT_RANGE:.0f} THEN printf('%!.17g', {column}) END"


# The lexical candidates (up to 400) come back as ONE row, a JSON array in bm25 order (the aggregate
# reads the ordered, limited sub-query in order), not one row each: the sqlite3 module releases and
# re-takes the GIL around every step, and under concurrent tool calls each re-take waits behind the
# event loop and the other worker threads (a convoy: at 64 clients this query alone was ~30% of the
# gateway's samples). `updated_at` travels as a 17-digit decimal string so the float round-trips.
_LEXICAL_AS_ONE_ROW = (
    f"json_group_array(json_array(id, pinned, {_exact_text('updated_at')}, useful, not_useful))"
)
# The scope's vector-cache generations, as scalar sub-queries riding along in the same statement.
_GENERATION = "(SELECT gen FROM scope_generations WHERE workspace = ? AND project = ?)"
# What a hit shows of its page, plus its text for the snippet: the FTS snippet of a lexical match,
# else the start of the body (one statement and one row for every hit; see `_hit_rows`).
_HIT_FIELDS = "p.workspace, p.project, p.path, p.version, p.title, p.tags, p.kind, p.pinned, p.updated_at"
_HIT_AS_ONE_ROW = (
    "json_group_array(json_array(p.id, p.workspace, p.project, p.path, p.version, p.title, p.tags,"
    f" p.kind, p.pinned, {_exact_text('p.updated_at')},"
    f" CASE WHEN s.s IS NULL OR s.s = '' THEN substr(p.body, 1, {SNIPPET_FALLBACK_CHARS * 2}) ELSE s.s END))"
)


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _derive_title(body: str, path: str) -> str:
    for line in body.splitlines()[:50]:
        stripped = line.strip()
        if stripped.startswith("# "):
            return stripped[2:].strip()[:MEMORY_TITLE_MAX_CHARS]
    stem = path.rsplit("/", 1)[-1]
    return stem[: -len(".md")] if stem.endswith(".md") else stem


def _check_limit(limit: int, maximum: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise MemoryValidationError(f"limit must be an integer from 1 to {maximum}, got {limit!r}")
    return limit


def _check_body(body: str) -> str:
    if not isinstance(body, str):
        raise MemoryValidationError("body must be a string")
    size = len(body.encode("utf-8", "surrogatepass"))
    if size > MEMORY_BODY_MAX_BYTES:
        raise MemoryTooLargeError(f"body is {size} bytes; the limit is {MEMORY_BODY_MAX_BYTES} bytes (1 MiB)")
    if "\x00" in body:
        raise MemoryValidationError("body must not contain NUL characters")
    try:
        body.encode("utf-8")
    except UnicodeEncodeError:
        raise MemoryValidationError("body is not valid Unicode (lone surrogate)") from None
    return body


class MemoryService:
    """The memory tools over one SQLite database in the server data directory."""

    def __init__(self, connections: Connections, embedder: Embedder | None) -> None:
        self._db = connections
        self._embedder = embedder
        self._vectors = VectorCache()

    @classmethod
    def open(cls, data_dir: ServerDataDir, *, embedder: Embedder | None = None) -> MemoryService:
        """Open (creating and migrating if needed) the database below `data_dir.memory`.

        Raises:
            MemorySchemaError: the database is newer than this code (left untouched).
            UnsafePathError: the directory or file is a symlink, foreign-owned or loosely permitted.
        """
        path = prepare_file(data_dir.root, data_dir.memory)
        connections = Connections(path)
        try:
            _open_schema(connections)
        except BaseException:
            connections.close()
            raise
        return cls(connections, embedder)

    def close(self) -> None:
        """Close every connection; later calls raise MemoryClosedError."""
        self._db.close()
        self._vectors.clear()

    def __enter__(self) -> MemoryService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def database_path(self) -> str:
        """The SQLite file's path."""
        return str(self._db.path)

    # ---- tools ----

    @guard
    def memory_query(
        self,
        text: str,
        workspace: str = DEFAULT_WORKSPACE,
        project: str = DEFAULT_PROJECT,
        limit: int = 10,
        include_global: bool = True,
    ) -> QueryResult:
        """Rank live, unexpired pages of one scope (plus `_global`) for `text`; bodies are not returned.

        FTS5 syntax in `text` is treated as plain words. Raises MemoryValidationError on bad names
        or limit, MemoryTooLargeError on an over-long query.
        """
        ws, pj = validate_workspace(workspace), validate_project(project)
        _check_limit(limit, MEMORY_QUERY_MAX_RESULTS)
        if not isinstance(text, str):
            raise MemoryValidationError("text must be a string")
        if len(text) > MEMORY_QUERY_MAX_CHARS:
            raise MemoryTooLargeError(
                f"query is {len(text)} characters; the limit is {MEMORY_QUERY_MAX_CHARS}"
            )
        projects = [pj] if pj == GLOBAL_PROJECT or not include_global else [pj, GLOBAL_PROJECT]
        expression = _ranking.fts_match_expression(text)
        candidates = min(400, max(50, limit * 4))
        query_vector = self._embed_query(text) if text.strip() else None
        now = time.time()
        scope_sql = (
            f"p.workspace = ? AND p.project IN ({','.join('?' * len(projects))}) AND p.deleted = 0 "
            "AND (p.expires_at IS NULL OR p.expires_at > ?)"
        )
        scope_args: list[Any] = [ws, *projects, now]
        gen_sql = ", ".join(_GENERATION for _ in projects)
        gen_args = [x for p in projects for x in (ws, p)]
        with self._db.read() as conn:
            lexical: list[int] = []
            signals: dict[int, _ranking.Signals] = {}
            if expression is not None:
                # The join reads each candidate's page row anyway: take its ranking signals along,
                # as one JSON row (see _LEXICAL_AS_ONE_ROW), and the scope's generations with it.
                packed = conn.execute(
                    f"SELECT {_LEXICAL_AS_ONE_ROW}, {gen_sql} FROM (SELECT {_SIGNAL_COLUMNS} "
                    "FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid "
                    f"WHERE pages_fts MATCH ? AND {scope_sql} "
                    f"ORDER BY bm25(pages_fts, {', '.join(map(str, _ranking.BM25_WEIGHTS))}) LIMIT ?)",
                    [*gen_args, expression, *scope_args, candidates],
                ).fetchone()
                rows = json.loads(packed[0]) if packed[0] else []
                generations = tuple(int(g or 0) for g in packed[1:])
                lexical = [int(r[0]) for r in rows]
                signals = _signals([r for r in rows if r[2] is not None])
                signals.update(_signals_by_id(conn, [int(r[0]) for r in rows if r[2] is None]))
            else:
                generations = tuple(
                    int(g or 0) for g in conn.execute(f"SELECT {gen_sql}", gen_args).fetchone()
                )
            semantic: list[tuple[int, float]] = []
            if query_vector is not None and self._embedder is not None:
                semantic = self._vectors.candidates(
                    conn, ws, projects, self._embedder.name, query_vector, candidates, now, generations
                )
            # Fusion ignores a semantic candidate below the floor, so only the others need signals;
            # full heads are read for the hits alone.
            extra = [pid for pid, cosine in semantic if cosine >= _ranking.DENSE_FLOOR and pid not in signals]
            signals.update(_signals_by_id(conn, extra))
            ranked = _ranking.fuse(lexical, semantic, signals, now)[:limit]
            matched = [r.page_id for r in ranked if r.match != "semantic"] if expression is not None else []
            found = _hit_rows(conn, expression, [r.page_id for r in ranked], matched)
            hits = []
            for r in ranked:
                h = found[r.page_id]
                snippet = " ".join(h.text.split())[: SNIPPET_FALLBACK_CHARS * 2]
                hits.append(
                    QueryHit(
                        workspace=h.workspace,
                        project=h.project,
                        path=h.path,
                        version=h.version,
                        title=h.title,
                        tags=json.loads(h.tags),
                        kind=h.kind,
                        pinned=bool(h.pinned),
                        updated_at=_dt(h.updated_at),
                        score=round(r.score, 6),
                        snippet=snippet,
                        match=r.match,
                    )
                )
        return QueryResult(
            query=text,
            workspace=ws,
            project=pj,
            include_global=include_global,
            semantic=query_vector is not None,
            hits=hits,
        )

    @guard
    def memory_recent(
        self, workspace: str = DEFAULT_WORKSPACE, project: str = DEFAULT_PROJECT, limit: int = 20
    ) -> RecentResult:
        """The most recently updated live, unexpired pages of one scope, without bodies."""
        ws, pj = validate_workspace(workspace), validate_project(project)
        _check_limit(limit, MEMORY_RECENT_MAX_RESULTS)
        conn = self._db.get()
        rows = conn.execute(
            f"SELECT {_HEAD_COLUMNS} FROM pages WHERE workspace = ? AND project = ? AND deleted = 0 "
            "AND (expires_at IS NULL OR expires_at > ?) ORDER BY updated_at DESC, id DESC LIMIT ?",
            (ws, pj, time.time(), limit),
        )
        now = time.time()
        names = _columns(rows)
        return RecentResult(
            workspace=ws,
            project=pj,
            pages=[_summary(dict(zip(names, r, strict=True)), now) for r in rows.fetchall()],
        )

    @guard
    def memory_read_page(
        self, workspace: str, project: str, path: str, *, version: int | None = None
    ) -> Page:
        """One page (its current version, or an older `version`) with body and metadata.

        Raises:
            MemoryNotFoundError: no such page, it was deleted, or no such version.
        """
        ws, pj, p = validate_workspace(workspace), validate_project(project), normalize_path(path)
        if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
            raise MemoryValidationError(f"version must be a positive integer, got {version!r}")
        with self._db.read() as conn:
            head = _head(conn, ws, pj, p)
            if head is None:
                raise MemoryNotFoundError(f"no memory page {p!r} in {ws}/{pj}")
            if version is None or version == head["version"]:
                if head["deleted"]:
                    raise MemoryNotFoundError(
                        f"memory page {p!r} in {ws}/{pj} was deleted (version {head['version']})"
                    )
                body = conn.execute("SELECT body FROM pages WHERE id = ?", (head["id"],)).fetchone()[0]
                return _page(head, body, head["version"], time.time())
            cur = conn.execute(
                "SELECT version, deleted, title, tags, entities, kind, pinned, expires_at, body, written_at "
                "FROM page_versions WHERE page_id = ? AND version = ?",
                (head["id"], version),
            )
            row = cur.fetchone()
            if row is None or row[1]:
                raise MemoryNotFoundError(f"memory page {p!r} in {ws}/{pj} has no readable version {version}")
            old = _row(cur, row)
            merged = dict(head)
            merged.update(old)
            merged["updated_at"] = old["written_at"]
            return _page(merged, old["body"], head["version"], time.time())

    @guard
    def memory_write_page(
        self,
        workspace: str,
        project: str,
        path: str,
        body: str,
        frontmatter: Frontmatter | Mapping[str, Any] | None = None,
        expected_version: int | None = None,
    ) -> WriteResult:
        """Write a new version of a page (creating it if needed); history is kept.

        `frontmatter=None` keeps the current metadata; `expected_version=0` means "must not exist".
        Credentials in the body or title are redacted before storing (listed in the result).

        Raises:
            MemoryConflictError: `expected_version` is not the current version.
            MemoryValidationError, MemoryTooLargeError: bad names, path, body or frontmatter.
        """
        ws, pj, p = validate_workspace(workspace), validate_project(project), normalize_path(path)
        _check_body(body)
        fm = None if frontmatter is None else parse_model(Frontmatter, frontmatter, what="frontmatter")
        if expected_version is not None and (
            isinstance(expected_version, bool)
            or not isinstance(expected_version, int)
            or expected_version < 0
        ):
            raise MemoryValidationError(
                f"expected_version must be a non-negative integer, got {expected_version!r}"
            )
        found = set(find_secrets(body))
        if found:  # redact() changes nothing when no pattern matched; skip its second pass
            body = redact(body)
        if fm is not None and fm.title and find_secrets(fm.title):
            found.update(find_secrets(fm.title))
            fm = fm.model_copy(update={"title": redact(fm.title)})
        vector = self._embed_passage(fm.title if fm and fm.title else _derive_title(body, p), body)
        with self._db.write() as conn:
            version, created = _write_tx(conn, ws, pj, p, body, fm, expected_version, time.time())
            self._store_vector(conn, ws, pj, p, version, vector)
        return WriteResult(
            workspace=ws,
            project=pj,
            path=p,
            version=version,
            created=created,
            redacted=sorted(found),
            embedded=vector is not None,
        )

    @guard
    def memory_feedback(
        self, workspace: str, project: str, path: str, useful: bool, note: str | None = None
    ) -> FeedbackResult:
        """Record whether a page was useful; the counters adjust its ranking.

        Raises:
            MemoryNotFoundError: no live page at that path.
        """
        ws, pj, p = validate_workspace(workspace), validate_project(project), normalize_path(path)
        if not isinstance(useful, bool):
            raise MemoryValidationError("useful must be true or false")
        if note is not None:
            if not isinstance(note, str):
                raise MemoryValidationError("note must be a string")
            if len(note) > MEMORY_FEEDBACK_NOTE_MAX_CHARS:
                raise MemoryTooLargeError(
                    f"note is {len(note)} characters; the limit is {MEMORY_FEEDBACK_NOTE_MAX_CHARS}"
                )
            note = redact(note.replace("\x00", ""))
        with self._db.write() as conn:
            head = _head(conn, ws, pj, p)
            if head is None or head["deleted"]:
                raise MemoryNotFoundError(f"no memory page {p!r} in {ws}/{pj}")
            column = "useful" if useful else "not_useful"
            conn.execute(f"UPDATE pages SET {column} = {column} + 1 WHERE id = ?", (head["id"],))
            conn.execute(
                "INSERT INTO page_feedback (page_id, version, useful, note, at) VALUES (?, ?, ?, ?, ?)",
                (head["id"], head["version"], int(useful), note, time.time()),
            )
            counts = conn.execute(
                "SELECT useful, not_useful FROM pages WHERE id = ?", (head["id"],)
            ).fetchone()
        return FeedbackResult(
            workspace=ws, project=pj, path=p, version=head["version"], useful=counts[0], not_useful=counts[1]
        )

    @guard
    def memory_delete_page(self, workspace: str, project: str, path: str, confirm: str) -> DeleteResult:
        """Delete a page (a tombstone version; history is kept). `confirm` must equal the normalized path.

        Raises:
            MemoryConfirmError: `confirm` differs from the normalized path.
            MemoryNotFoundError: no live page at that path.
        """
        ws, pj, p = validate_workspace(workspace), validate_project(project), normalize_path(path)
        if not isinstance(confirm, str) or confirm != p:
            raise MemoryConfirmError(f"confirm must equal the normalized path {p!r}")
        now = time.time()
        with self._db.write() as conn:
            head = _head(conn, ws, pj, p)
            if head is None or head["deleted"]:
                raise MemoryNotFoundError(f"no memory page {p!r} in {ws}/{pj}")
            _archive(conn, head["id"])
            conn.execute(
                "UPDATE pages SET version = version + 1, deleted = 1, title = '', body = '', tags = '[]', "
                "entities = '[]', pinned = 0, expires_at = NULL, updated_at = ? WHERE id = ?",
                (now, head["id"]),
            )
            conn.execute("DELETE FROM page_vectors WHERE page_id = ?", (head["id"],))
            _touch(conn, now)
        return DeleteResult(workspace=ws, project=pj, path=p, version=head["version"] + 1)

    @guard
    def memory_status(self) -> StatusResult:
        """Counts, database size, schema version and the time of the last write."""
        with self._db.read() as conn:

            def one(sql: str) -> int:
                return int(conn.execute(sql).fetchone()[0] or 0)

            version = _schema.current_version(conn)
            last = conn.execute("SELECT value FROM meta WHERE key = 'last_write_at'").fetchone()
            status = StatusResult(
                schema_version=version,
                schema_name=_schema.MIGRATIONS[version - 1].name,
                pages=one("SELECT count(*) FROM pages WHERE deleted = 0"),
                deleted_pages=one("SELECT count(*) FROM pages WHERE deleted = 1"),
                versions=one("SELECT count(*) FROM pages") + one("SELECT count(*) FROM page_versions"),
                scopes=one(
                    "SELECT count(*) FROM (SELECT DISTINCT workspace, project FROM pages WHERE deleted = 0)"
                ),
                hook_events=one("SELECT count(*) FROM hook_events"),
                sessions=one("SELECT count(*) FROM hook_sessions"),
                embedded_pages=one("SELECT count(*) FROM page_vectors"),
                embedder=self._embedder.name if self._embedder is not None else None,
                database_bytes=_file_bytes(str(self._db.path)),
                last_write_at=_dt(float(last[0])) if last else None,
            )
        return status

    # ---- hook intake ----

    @guard
    def hook_event(self, event: HookEvent | Mapping[str, Any]) -> HookResult:
        """Apply one hook event (once per idempotency key); returns applied, duplicate or rejected.

        Raises:
            MemoryValidationError, MemoryTooLargeError: the event is malformed or too large.
        """
        parsed = _parse_event(event)
        result = self._apply_events([parsed])[0]
        if isinstance(result, IvoaiError):
            raise result
        return result

    @guard
    def hook_batch(
        self, events: HookBatch | Sequence[HookEvent | Mapping[str, Any]] | Mapping[str, Any]
    ) -> HookBatchResult:
        """Apply up to MEMORY_HOOK_BATCH_MAX_EVENTS events; an invalid one is rejected, not fatal.

        Raises:
            MemoryValidationError: the batch itself is empty, too long or not a list.
        """
        if isinstance(events, HookBatch):
            raw: Sequence[Any] = events.events
        elif isinstance(events, Mapping):
            raw = events.get("events")  # type: ignore[assignment]
        else:
            raw = events
        if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
            raise MemoryValidationError("hook batch field 'events' must be a list")
        if not 1 <= len(raw) <= MEMORY_HOOK_BATCH_MAX_EVENTS:
            raise MemoryValidationError(
                f"hook batch field 'events' has {len(raw)} events; "
                f"it must have 1 to {MEMORY_HOOK_BATCH_MAX_EVENTS}"
            )
        parsed: list[HookEvent | IvoaiError] = []
        keys: list[str] = []
        for item in raw:
            key = (
                item.idempotency_key
                if isinstance(item, HookEvent)
                else (item.get("idempotency_key") if isinstance(item, Mapping) else None)
            )
            keys.append(key if isinstance(key, str) else "")
            try:
                parsed.append(_parse_event(item))
            except IvoaiError as exc:
                parsed.append(exc)
        outcomes = self._apply_events(parsed)
        results = [
            o
            if isinstance(o, HookResult)
            else HookResult(idempotency_key=k[:128], status="rejected", error_code=o.code, error=o.message)
            for k, o in zip(keys, outcomes, strict=True)
        ]
        return HookBatchResult(
            applied=sum(r.status == "applied" for r in results),
            duplicates=sum(r.status == "duplicate" for r in results),
            rejected=sum(r.status == "rejected" for r in results),
            results=results,
        )

    def _apply_events(self, events: Sequence[HookEvent | IvoaiError]) -> list[HookResult | IvoaiError]:
        now = time.time()
        prepared: list[tuple[HookEvent, str, str, list[str]] | IvoaiError] = []
        for item in events:
            if isinstance(item, IvoaiError):
                prepared.append(item)
                continue
            try:
                ws = validate_workspace(item.workspace)
                clean, found = redact_event(item)
                pj = resolve_project(clean)
            except IvoaiError as exc:
                prepared.append(exc)
                continue
            prepared.append((clean, ws, pj, found))
        out: list[HookResult | IvoaiError] = []
        touched: dict[int, None] = {}
        with self._db.write() as conn:
            for prep in prepared:
                if isinstance(prep, IvoaiError):
                    out.append(prep)
                    continue
                clean, ws, pj, found = prep
                out.append(_record_event(conn, clean, ws, pj, found, now, touched))
            versions = {row_id: _render_session_tx(conn, row_id, now) for row_id in touched}
        final: list[HookResult | IvoaiError] = []
        for o in out:
            if isinstance(o, HookResult) and o.status == "applied" and o.version is not None:
                o = o.model_copy(update={"version": versions[o.version][1], "path": versions[o.version][0]})
            final.append(o)
        return final

    # ---- embeddings ----

    def _embed_query(self, text: str) -> list[float] | None:
        if self._embedder is None:
            return None
        try:
            return list(self._embedder.embed_queries([text])[0])
        except (IvoaiError, RuntimeError, OSError, ValueError):
            return None  # the embedder is optional: lexical ranking still answers

    def _embed_passage(self, title: str, body: str) -> list[float] | None:
        if self._embedder is None:
            return None
        try:
            return list(self._embedder.embed_passages([f"{title}\n{body}"[:MEMORY_EMBED_MAX_CHARS]])[0])
        except (IvoaiError, RuntimeError, OSError, ValueError):
            return None

    def _store_vector(
        self, conn: sqlite3.Connection, ws: str, pj: str, path: str, version: int, vector: list[float] | None
    ) -> None:
        head = _head(conn, ws, pj, path)
        assert head is not None
        if vector is None or self._embedder is None:
            conn.execute("DELETE FROM page_vectors WHERE page_id = ?", (head["id"],))
            return
        conn.execute(
            "INSERT OR REPLACE INTO page_vectors (page_id, version, model, dims, vec) VALUES (?, ?, ?, ?, ?)",
            (head["id"], version, self._embedder.name, len(vector), array("f", vector).tobytes()),
        )

    @guard
    def embed_missing(
        self, *, batch_size: int = 32, max_pages: int | None = None, embedder: Embedder | None = None
    ) -> int:
        """Embed live pages that have no current vector for this embedder; returns how many were embedded.

        `embedder` computes the vectors instead of the service's own (a gateway passes its low-priority
        embedding process); it must be the same model (vectors are stored under the service's
        embedder name).
        """
        if self._embedder is None:
            return 0
        compute = embedder if embedder is not None else self._embedder
        done = 0
        while max_pages is None or done < max_pages:
            size = batch_size if max_pages is None else min(batch_size, max_pages - done)
            conn = self._db.get()
            rows = conn.execute(
                "SELECT p.id, p.version, p.title, p.body FROM pages p "
                "LEFT JOIN page_vectors v ON v.page_id = p.id "
                "WHERE p.deleted = 0 AND (v.page_id IS NULL OR v.version != p.version OR v.model != ?) "
                "ORDER BY p.id LIMIT ?",
                (self._embedder.name, size),
            ).fetchall()
            if not rows:
                break
            vectors = compute.embed_passages([f"{r[2]}\n{r[3]}"[:MEMORY_EMBED_MAX_CHARS] for r in rows])
            with self._db.write() as wconn:
                for (pid, version, _t, _b), vec in zip(rows, vectors, strict=True):
                    wconn.execute(
                        "INSERT OR REPLACE INTO page_vectors (page_id, version, model, dims, vec) "
                        "SELECT id, version, ?, ?, ? FROM pages WHERE id = ? AND version = ?",
                        (self._embedder.name, len(vec), array("f", list(vec)).tobytes(), pid, version),
                    )
            done += len(rows)
        return done

    @guard
    def missing_vectors(self) -> int:
        """How many live pages lack a current vector for this service's embedder (0 without one)."""
        if self._embedder is None:
            return 0
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT count(*) FROM pages p LEFT JOIN page_vectors v ON v.page_id = p.id "
                "WHERE p.deleted = 0 AND (v.page_id IS NULL OR v.version != p.version OR v.model != ?)",
                (self._embedder.name,),
            ).fetchone()
        return int(row[0] or 0)

    # ---- export support ----

    def iter_pages(self, workspace: str | None = None, project: str | None = None) -> Iterator[Page]:
        """Every live page (expired ones included), ordered by workspace, project and path."""
        ws = None if workspace is None else validate_workspace(workspace)
        pj = None if project is None else validate_project(project)
        last = ("", "", "")
        while True:
            pages = self._page_batch(ws, pj, last)
            if not pages:
                return
            yield from pages
            last = (pages[-1].workspace, pages[-1].project, pages[-1].path)

    @guard
    def _page_batch(self, ws: str | None, pj: str | None, after: tuple[str, str, str]) -> list[Page]:
        conn = self._db.get()
        cur = conn.execute(
            f"SELECT {_HEAD_COLUMNS}, body FROM pages WHERE deleted = 0 "
            "AND (? IS NULL OR workspace = ?) AND (? IS NULL OR project = ?) "
            "AND (workspace, project, path) > (?, ?, ?) ORDER BY workspace, project, path LIMIT 200",
            (ws, ws, pj, pj, *after),
        )
        now = time.time()
        names = _columns(cur)
        heads = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        return [_page(h, h["body"], h["version"], now) for h in heads]


# ---- helpers over one connection (called inside a transaction) ----


def _open_schema(connections: Connections) -> None:
    try:
        # Read the version before anything writes (not even the journal mode): a newer database
        # must be left exactly as it was.
        probe = sqlite3.connect(connections.path, timeout=MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS)
        try:
            version = _schema.current_version(probe)
        finally:
            probe.close()
        if version > _schema.LATEST.version:
            _schema.check_supported_version(version)
        _schema.migrate(connections.get())
    except sqlite3.DatabaseError as exc:
        raise MemoryStoreError(f"memory database {connections.path} is unusable: {exc}") from None


def _row(cur: sqlite3.Cursor, row: Sequence[Any]) -> dict[str, Any]:
    return dict(zip(_columns(cur), row, strict=True))


def _columns(cur: sqlite3.Cursor) -> list[str]:
    return [d[0] for d in cur.description]


def _head(conn: sqlite3.Connection, ws: str, pj: str, path: str) -> dict[str, Any] | None:
    cur = conn.execute(
        f"SELECT {_HEAD_COLUMNS} FROM pages WHERE workspace = ? AND project = ? AND path = ?", (ws, pj, path)
    )
    row = cur.fetchone()
    return None if row is None else _row(cur, row)


@dataclass(frozen=True)
class _HitRow:
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


def _hit_rows(
    conn: sqlite3.Connection, expression: str | None, ids: Sequence[int], matched: Sequence[int]
) -> dict[int, _HitRow]:
    """The hits' page fields and snippet texts in ONE statement and ONE row (see _LEXICAL_AS_ONE_ROW).

    A matched hit's text is its FTS snippet, any other's (or one with an empty snippet) the start of
    its body. Identical to `_hit_rows_by_row`, which it falls back to for a timestamp it cannot pack.
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
    rows = json.loads(packed[0]) if packed and packed[0] else []
    if any(r[9] is None for r in rows):
        return _hit_rows_by_row(conn, expression, ids, matched)
    return {
        int(r[0]): _HitRow(r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], float(r[9]), r[10]) for r in rows
    }


def _hit_rows_by_row(
    conn: sqlite3.Connection, expression: str | None, ids: Sequence[int], matched: Sequence[int]
) -> dict[int, _HitRow]:
    """`_hit_rows` one row and one statement per hit (the reference the packed form is tested against)."""
    out: dict[int, _HitRow] = {}
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
        out[pid] = _HitRow(ws, pj, path, version, title, tags, kind, pinned, updated_at, text)
    return out


def _signals(rows: Sequence[Sequence[Any]]) -> dict[int, _ranking.Signals]:
    """Ranking signals by page id from `_SIGNAL_COLUMNS` rows, in row order."""
    return {
        int(pid): _ranking.Signals(bool(pinned), float(updated), int(useful), int(not_useful))
        for pid, pinned, updated, useful, not_useful in rows
    }


def _signals_by_id(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, _ranking.Signals]:
    if not ids:
        return {}
    cur = conn.execute(
        f"SELECT {_SIGNAL_COLUMNS} FROM pages p WHERE p.id IN ({','.join('?' * len(ids))})", list(ids)
    )
    return _signals(cur.fetchall())


def _summary(head: Mapping[str, Any], now: float) -> PageSummary:
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
    return Page(**_summary(head, now).model_dump(), body=body, latest_version=latest)


def _archive(conn: sqlite3.Connection, page_id: int) -> None:
    conn.execute(
        "INSERT INTO page_versions (page_id, version, deleted, title, tags, entities, kind, pinned, "
        "expires_at, body, written_at) SELECT id, version, deleted, title, tags, entities, kind, pinned, "
        "expires_at, body, updated_at FROM pages WHERE id = ?",
        (page_id,),
    )


def _touch(conn: sqlite3.Connection, now: float) -> None:
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_write_at', ?)", (repr(now),))


def _write_tx(
    conn: sqlite3.Connection,
    ws: str,
    pj: str,
    path: str,
    body: str,
    fm: Frontmatter | None,
    expected_version: int | None,
    now: float,
) -> tuple[int, bool]:
    """Check the version and write the new head; returns (version, created)."""
    head = _head(conn, ws, pj, path)
    live = 0 if head is None or head["deleted"] else int(head["version"])
    if expected_version is not None and expected_version != live:
        current = (
            "absent"
            if head is None
            else (
                f"deleted at version {head['version']}" if head["deleted"] else f"version {head['version']}"
            )
        )
        raise MemoryConflictError(
            f"memory page {path!r} in {ws}/{pj}: expected version {expected_version}, but it is {current}; "
            "re-read the page and retry"
        )
    if fm is None:
        if head is not None and not head["deleted"]:
            title = head["title"]
            tags, entities, kind = head["tags"], head["entities"], head["kind"]
            pinned, expires = head["pinned"], head["expires_at"]
        else:
            fm = Frontmatter()
    if fm is not None:
        title = fm.title or _derive_title(body, path)
        tags, entities, kind = json.dumps(fm.tags), json.dumps(fm.entities), fm.kind
        pinned, expires = int(fm.pinned), None if fm.expires_at is None else fm.expires_at.timestamp()
    if head is None:
        conn.execute(
            "INSERT INTO pages (workspace, project, path, version, deleted, title, tags, entities, kind, "
            "pinned, expires_at, body, created_at, updated_at) "
            "VALUES (?, ?, ?, 1, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (ws, pj, path, title, tags, entities, kind, pinned, expires, body, now, now),
        )
        version, created = 1, True
    else:
        _archive(conn, head["id"])
        version, created = int(head["version"]) + 1, bool(head["deleted"])
        conn.execute(
            "UPDATE pages SET version = ?, deleted = 0, title = ?, tags = ?, entities = ?, kind = ?, "
            "pinned = ?, expires_at = ?, body = ?, updated_at = ?, "
            "created_at = CASE WHEN deleted = 1 THEN ? ELSE created_at END "
            "WHERE id = ?",
            (version, title, tags, entities, kind, pinned, expires, body, now, now, head["id"]),
        )
    _touch(conn, now)
    return version, created


def _parse_event(event: HookEvent | Mapping[str, Any] | Any) -> HookEvent:
    if isinstance(event, HookEvent):
        size = len(event.model_dump_json().encode("utf-8"))
    elif isinstance(event, Mapping):
        try:
            size = len(json.dumps(event, default=str).encode("utf-8"))
        except (TypeError, ValueError):
            raise MemoryValidationError("hook event is not JSON-serializable") from None
    else:
        raise MemoryValidationError("hook event must be an object")
    if size > MEMORY_HOOK_EVENT_MAX_BYTES:
        raise MemoryTooLargeError(
            f"hook event is {size} bytes; the limit is {MEMORY_HOOK_EVENT_MAX_BYTES} bytes"
        )
    return parse_model(HookEvent, event, what="hook event")


def _record_event(
    conn: sqlite3.Connection,
    event: HookEvent,
    ws: str,
    pj: str,
    found: list[str],
    now: float,
    touched: dict[int, None],
) -> HookResult:
    """Store one redacted event unless its key was seen; returns its result (version = session row)."""
    data = event.model_dump_json()
    digest = sha256_hex(event.model_dump_json(exclude={"idempotency_key"}))
    seen = conn.execute(
        "SELECT 1 FROM hook_events WHERE workspace = ? AND idempotency_key = ?", (ws, event.idempotency_key)
    ).fetchone()
    if seen is not None:
        return HookResult(idempotency_key=event.idempotency_key, status="duplicate", workspace=ws, project=pj)
    stamp = event.at
    if stamp is not None and stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)  # a time without a zone is UTC, not the server's local time
    at = stamp.timestamp() if stamp is not None else now
    at = min(at, now + CLOCK_SKEW_ALLOWED_SECONDS)
    session = conn.execute(
        "SELECT id, path FROM hook_sessions WHERE workspace = ? AND project = ? AND session_id = ?",
        (ws, pj, event.session_id),
    ).fetchone()
    if session is None:
        path = session_page_path(event.session_id, at)
        cur = conn.execute(
            "INSERT INTO hook_sessions (workspace, project, session_id, path, agent, first_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (ws, pj, event.session_id, path, event.agent, at),
        )
        row_id = int(cur.lastrowid or 0)
    else:
        row_id, path = int(session[0]), str(session[1])
    stored = conn.execute(
        "SELECT count(*) FROM hook_events WHERE session_row = ? AND data != ''", (row_id,)
    ).fetchone()
    if int(stored[0]) >= MEMORY_SESSION_MAX_EVENTS:
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


def _render_session_tx(conn: sqlite3.Connection, row_id: int, now: float) -> tuple[str, int]:
    """Re-render one session page from its stored events; returns (path, new version)."""
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
    info = SessionInfo(ws, pj, session_id, agent, float(first_at), int(dropped))
    title, body, tags = render_session(info, events)
    fm = Frontmatter(title=title[:MEMORY_TITLE_MAX_CHARS], tags=tags, kind="session")
    version, _created = _write_tx(conn, ws, pj, path, body, fm, None, now)
    page_id = conn.execute(
        "SELECT id FROM pages WHERE workspace = ? AND project = ? AND path = ?", (ws, pj, path)
    ).fetchone()[0]
    conn.execute(
        "DELETE FROM page_versions WHERE page_id = ? AND version <= ?",
        (page_id, version - 1 - MEMORY_SESSION_HISTORY_MAX_VERSIONS),
    )
    conn.execute("DELETE FROM page_vectors WHERE page_id = ?", (page_id,))
    return path, version


def _file_bytes(db_path: str) -> int:
    total = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(FileNotFoundError):
            total += os.stat(db_path + suffix).st_size
    return total
