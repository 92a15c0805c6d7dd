"""MemoryService: durable, versioned Markdown pages for agents, with ranking and hook intake.

Transport-free and synchronous; safe to call from several threads (one SQLite connection per
thread, WAL, busy timeout, immediate write transactions) and from several processes.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any

from ivoai.common.errors import IvoaiError
from ivoai.common.limits import (
    MEMORY_EMBED_MAX_CHARS,
    MEMORY_HOOK_EVENT_MAX_BYTES,
    MEMORY_SESSION_HISTORY_MAX_VERSIONS,
    MEMORY_SESSION_MAX_EVENTS,
    MEMORY_TITLE_MAX_CHARS,
)
from ivoai.common.redact import find_secrets, redact
from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory import _ranking
from ivoai.server.memory import _repository as repo
from ivoai.server.memory._db import Connections, guard, prepare_file
from ivoai.server.memory._names import (
    DEFAULT_PROJECT,
    DEFAULT_WORKSPACE,
    GLOBAL_PROJECT,
    validate_project,
    validate_workspace,
)
from ivoai.server.memory._vectors import VectorCache
from ivoai.server.memory.arguments import (
    DeleteArgs,
    FeedbackArgs,
    HookBatchArgs,
    QueryArgs,
    ReadArgs,
    RecentArgs,
    WriteArgs,
)
from ivoai.server.memory.errors import (
    MemoryTooLargeError,
    MemoryValidationError,
)
from ivoai.server.memory.hooks import (
    HookBatch,
    HookBatchResult,
    HookEvent,
    HookResult,
    redact_event,
    render_session,
    resolve_project,
)
from ivoai.server.memory.models import (
    DeleteResult,
    FeedbackResult,
    Frontmatter,
    QueryResult,
    RecentResult,
    WriteResult,
    parse_model,
)

if TYPE_CHECKING:
    from ivoai.server.context.embeddings import Embedder
    from ivoai.server.memory.models import Page, StatusResult

CLOCK_SKEW_ALLOWED_SECONDS = 300.0  # a hook event stamped further ahead than this gets the server's time


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
            repo.open_schema(connections)
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
        args = QueryArgs(workspace=workspace, project=project, limit=limit, text=text)
        ws, pj = args.workspace, args.project
        projects = [pj] if pj == GLOBAL_PROJECT or not include_global else [pj, GLOBAL_PROJECT]
        expression = _ranking.fts_match_expression(text)
        candidates = min(400, max(50, limit * 4))
        query_vector = self._embed_query(text) if text.strip() else None
        now = time.time()
        with self._db.read() as conn:
            lexical, signals, generations = repo.lexical_candidates(
                conn, ws, projects, now, expression, candidates
            )
            semantic: list[tuple[int, float]] = []
            if query_vector is not None and self._embedder is not None:
                semantic = self._vectors.candidates(
                    conn, ws, projects, self._embedder.name, query_vector, candidates, now, generations
                )
            # Fusion ignores a semantic candidate below the floor, so only the others need signals;
            # full heads are read for the hits alone.
            extra = [pid for pid, cosine in semantic if cosine >= _ranking.DENSE_FLOOR and pid not in signals]
            signals.update(repo.signals_by_id(conn, extra))
            ranked = _ranking.fuse(lexical, semantic, signals, now)[:limit]
            matched = [r.page_id for r in ranked if r.match != "semantic"] if expression is not None else []
            rows = repo.hit_rows(conn, expression, [r.page_id for r in ranked], matched)
        hits = [rows[r.page_id].hit(r.score, r.match) for r in ranked]
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
        args = RecentArgs(workspace=workspace, project=project, limit=limit)
        pages = repo.recent(self._db.get(), args.workspace, args.project, args.limit, time.time())
        return RecentResult(workspace=args.workspace, project=args.project, pages=pages)

    @guard
    def memory_read_page(
        self, workspace: str, project: str, path: str, *, version: int | None = None
    ) -> Page:
        """One page (its current version, or an older `version`) with body and metadata.

        Raises:
            MemoryNotFoundError: no such page, it was deleted, or no such version.
        """
        args = ReadArgs(workspace=workspace, project=project, path=path, version=version)
        with self._db.read() as conn:
            return repo.read_page(conn, args.workspace, args.project, args.path, args.version, time.time())

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
        args = WriteArgs.model_validate(
            {
                "workspace": workspace,
                "project": project,
                "path": path,
                "body": body,
                "frontmatter": frontmatter,
                "expected_version": expected_version,
            }
        )
        ws, pj, p, fm = args.workspace, args.project, args.path, args.frontmatter
        found = set(find_secrets(body))
        if found:  # redact() changes nothing when no pattern matched; skip its second pass
            body = redact(body)
        if fm is not None and fm.title and find_secrets(fm.title):
            found.update(find_secrets(fm.title))
            fm = fm.model_copy(update={"title": redact(fm.title)})
        vector = self._embed_passage(fm.title if fm and fm.title else _derive_title(body, p), body)
        model = self._embedder.name if self._embedder is not None else None
        with self._db.write() as conn:
            version, created = repo.write_version(
                conn,
                (ws, pj, p),
                body,
                fm,
                lambda: _derive_title(body, p),
                args.expected_version,
                time.time(),
            )
            repo.store_vector(conn, (ws, pj, p), version, model, vector)
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
        args = FeedbackArgs(workspace=workspace, project=project, path=path, useful=useful, note=note)
        ws, pj, p = args.workspace, args.project, args.path
        clean = None if args.note is None else redact(args.note.replace("\x00", ""))
        with self._db.write() as conn:
            head = repo.live_head(conn, ws, pj, p)
            useful_count, not_useful_count = repo.add_feedback(conn, head, args.useful, clean, time.time())
        return FeedbackResult(
            workspace=ws,
            project=pj,
            path=p,
            version=head["version"],
            useful=useful_count,
            not_useful=not_useful_count,
        )

    @guard
    def memory_delete_page(self, workspace: str, project: str, path: str, confirm: str) -> DeleteResult:
        """Delete a page (a tombstone version; history is kept). `confirm` must equal the normalized path.

        Raises:
            MemoryConfirmError: `confirm` differs from the normalized path.
            MemoryNotFoundError: no live page at that path.
        """
        args = DeleteArgs(workspace=workspace, project=project, path=path, confirm=confirm)
        ws, pj, p = args.workspace, args.project, args.path
        now = time.time()
        with self._db.write() as conn:
            head = repo.live_head(conn, ws, pj, p)
            repo.tombstone(conn, head["id"], now)
        return DeleteResult(workspace=ws, project=pj, path=p, version=head["version"] + 1)

    @guard
    def memory_status(self) -> StatusResult:
        """Counts, database size, schema version and the time of the last write."""
        with self._db.read() as conn:
            return repo.status(
                conn, self._embedder.name if self._embedder is not None else None, str(self._db.path)
            )

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
        raw = HookBatchArgs.model_validate({"events": events}).events
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
                times = (_event_time(clean, now), now)
                out.append(
                    repo.record_event(conn, clean, (ws, pj), found, times, MEMORY_SESSION_MAX_EVENTS, touched)
                )
            versions = {row_id: _render_session(conn, row_id, now) for row_id in touched}
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
            rows = repo.pages_without_vector(self._db.get(), self._embedder.name, size)
            if not rows:
                break
            vectors = compute.embed_passages([f"{r[2]}\n{r[3]}"[:MEMORY_EMBED_MAX_CHARS] for r in rows])
            pairs = [((pid, version), vec) for (pid, version, _t, _b), vec in zip(rows, vectors, strict=True)]
            with self._db.write() as wconn:
                repo.store_vectors(wconn, self._embedder.name, pairs)
            done += len(rows)
        return done

    @guard
    def missing_vectors(self) -> int:
        """How many live pages lack a current vector for this service's embedder (0 without one)."""
        if self._embedder is None:
            return 0
        with self._db.read() as conn:
            return repo.count_without_vector(conn, self._embedder.name)

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
        return repo.page_batch(self._db.get(), ws, pj, after, time.time())


def _derive_title(body: str, path: str) -> str:
    for line in body.splitlines()[:50]:
        stripped = line.strip()
        if stripped.startswith("# "):
            return stripped[2:].strip()[:MEMORY_TITLE_MAX_CHARS]
    stem = path.rsplit("/", 1)[-1]
    return stem[: -len(".md")] if stem.endswith(".md") else stem


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


def _event_time(event: HookEvent, now: float) -> float:
    """When the event happened: its own time (a time without a zone is UTC), never far ahead of `now`."""
    stamp = event.at
    if stamp is not None and stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)  # a time without a zone is UTC, not the server's local time
    at = stamp.timestamp() if stamp is not None else now
    return min(at, now + CLOCK_SKEW_ALLOWED_SECONDS)


def _render_session(conn: sqlite3.Connection, row_id: int, now: float) -> tuple[str, int]:
    """Re-render one session page from its stored events; returns (path, new version)."""
    info, path, events = repo.session(conn, row_id)
    title, body, tags = render_session(info, events)
    fm = Frontmatter(title=title[:MEMORY_TITLE_MAX_CHARS], tags=tags, kind="session")
    scope = (info.workspace, info.project, path)
    version, _created = repo.write_version(
        conn, scope, body, fm, lambda: _derive_title(body, path), None, now
    )
    repo.trim_session_page(conn, scope, version - 1 - MEMORY_SESSION_HISTORY_MAX_VERSIONS)
    return path, version
