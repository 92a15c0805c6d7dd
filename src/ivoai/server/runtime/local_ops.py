"""Context operations for the CLI: in this process, or through the running gateway's admin socket.

`open_context_ops(DIR)` is what `ivoai server context search|status` and `ivoai server ingest` use.
When a gateway serves DIR (its run file names a live process and its admin socket answers) the
request goes through the socket (the gateway holds the index); otherwise the context service is
opened here, as before. Both return the same models, so the commands print the same output.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from ivoai.common.errors import IvoaiError
from ivoai.common.limits import ADMIN_SOCKET_REQUEST_TIMEOUT_SECONDS, CONTEXT_BACKGROUND_POLL_SECONDS
from ivoai.server.context.embeddings import Embedder
from ivoai.server.context.ingest import IngestProgress
from ivoai.server.context.models import ConnectorInfo, Coverage, HealthResponse, IngestReport, SearchResponse
from ivoai.server.datadir import ServerDataDir
from ivoai.server.runtime.admin import short_path, socket_path

ProgressFn = Callable[[IngestProgress], None]
POLL_SECONDS = 0.5  # how often the CLI asks a gateway about an ingest it started
STOPPED_GRACE_SECONDS = 3 * CONTEXT_BACKGROUND_POLL_SECONDS  # a woken gateway starts embedding within this


class ContextOps(Protocol):
    """What the context commands need, wherever it runs."""

    via_gateway: bool

    def search(
        self, query: str, *, limit: int, connector: str | None, path_prefix: str | None
    ) -> SearchResponse: ...
    def status(self) -> tuple[HealthResponse, list[ConnectorInfo]]: ...
    def ingest(
        self,
        connector: str | None,
        progress: ProgressFn | None,
        *,
        embed: bool,
        should_stop: Callable[[], bool] | None = None,
    ) -> IngestReport: ...
    def coverage(self, connector: str | None = None) -> Coverage: ...


class LocalOps:
    """The context service in this process."""

    via_gateway = False

    def __init__(self, data: ServerDataDir) -> None:
        from ivoai.server.config import load_config
        from ivoai.server.context.service import ContextService

        self.svc = ContextService.open(data, load_config(data).context)

    def search(
        self, query: str, *, limit: int, connector: str | None, path_prefix: str | None
    ) -> SearchResponse:
        """Hybrid search."""
        return self.svc.context_search(query, limit=limit, connector=connector, path_prefix=path_prefix)

    def status(self) -> tuple[HealthResponse, list[ConnectorInfo]]:
        """Health and connectors."""
        return self.svc.context_health(), self.svc.list_connectors()

    def ingest(
        self,
        connector: str | None,
        progress: ProgressFn | None,
        *,
        embed: bool,
        should_stop: Callable[[], bool] | None = None,
    ) -> IngestReport:
        """Phase 1, then phase 2 in the foreground unless `embed` is false (`should_stop` is asked
        between phase 2 batches)."""
        return self.svc.ingest(connector, progress=progress, embed=embed, should_stop=should_stop)

    def coverage(self, connector: str | None = None) -> Coverage:
        """Dense coverage now."""
        return self.svc.coverage(connector)

    def close(self) -> None:
        self.svc.close()


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class GatewayGone(IvoaiError):
    """The gateway's admin socket did not answer."""

    code = "gateway_unreachable"


class AdminClient:
    """JSON requests to a gateway's admin socket."""

    def __init__(self, data: ServerDataDir) -> None:
        self.data = data

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request; the gateway's error answers are raised as IvoaiError with their code.

        Raises:
            GatewayGone: the socket did not answer. IvoaiError: the gateway refused the request.
        """
        with short_path(self.data) as sock_path:
            conn = _UnixConnection(sock_path, ADMIN_SOCKET_REQUEST_TIMEOUT_SECONDS)
            try:
                payload = json.dumps(body).encode() if body is not None else None
                headers = {"Content-Type": "application/json"} if payload is not None else {}
                conn.request(method, path, body=payload, headers=headers)
                response = conn.getresponse()
                raw = response.read()
            except OSError as exc:
                raise GatewayGone(
                    f"the running server did not answer on {socket_path(self.data)}: {exc}"
                ) from None
            finally:
                conn.close()
        try:
            data = json.loads(raw)
        except ValueError:
            raise IvoaiError(f"the running server answered HTTP {response.status} without JSON") from None
        if response.status >= 400:
            err = IvoaiError(str(data.get("message", "request failed")), code=str(data.get("error", "error")))
            err.exit_code = int(data.get("exit_code", 1))
            raise err
        return data


class GatewayOps:
    """The context service of a running gateway, through its admin socket."""

    via_gateway = True

    def __init__(self, client: AdminClient) -> None:
        self.client = client

    def search(
        self, query: str, *, limit: int, connector: str | None, path_prefix: str | None
    ) -> SearchResponse:
        """Hybrid search in the gateway."""
        body = {"query": query, "limit": limit, "connector": connector, "path_prefix": path_prefix}
        return SearchResponse.model_validate(self.client.call("POST", "/v1/context/search", body))

    def status(self) -> tuple[HealthResponse, list[ConnectorInfo]]:
        """Health and connectors as the gateway sees them."""
        data = self.client.call("GET", "/v1/context/status")
        return (
            HealthResponse.model_validate(data["health"]),
            [ConnectorInfo.model_validate(c) for c in data["connectors"]],
        )

    def coverage(self, connector: str | None = None) -> Coverage:
        """Dense coverage now."""
        query = f"?connector={quote(connector)}" if connector else ""
        return Coverage.model_validate(self.client.call("GET", "/v1/context/coverage" + query))

    def ingest(
        self,
        connector: str | None,
        progress: ProgressFn | None,
        *,
        embed: bool,
        should_stop: Callable[[], bool] | None = None,
    ) -> IngestReport:
        """Phase 1 in the gateway (with its progress); then, with `embed`, follow the gateway's
        background phase 2 until the connector's chunks are embedded (or `should_stop()`: the
        gateway goes on embedding).

        Raises:
            IvoaiError: as the in-process ingest (the gateway's error code and message).
        """
        job = self.client.call("POST", "/v1/context/ingest", {"connector": connector, "embed": embed})["job"]
        lexical: IngestProgress | None = None
        while True:
            state = self.client.call("GET", f"/v1/context/ingest/{quote(job)}")
            snap = state.get("progress")
            if progress is not None and snap is not None:
                if (
                    lexical is None
                    or lexical.connector != snap["connector"]
                    or lexical.phase != snap["phase"]
                ):
                    lexical = IngestProgress(snap["connector"], snap["phase"])
                lexical.documents_total, lexical.chunks_total = snap["documents_total"], snap["chunks_total"]
                lexical.advance(
                    chunks=snap["chunks_done"] - lexical.chunks_done,
                    documents=snap["documents_done"] - lexical.documents_done,
                )
                progress(lexical)
            if state["state"] == "failed":
                err = IvoaiError(state["error"]["message"], code=state["error"]["error"])
                err.exit_code = int(state["error"].get("exit_code", 1))
                raise err
            if state["state"] == "done":
                break
            time.sleep(POLL_SECONDS)
        report = IngestReport.model_validate(state["report"])
        if not embed:
            return report.model_copy(update={"embedding": "lexical_only", "coverage": self.coverage()})
        return self._follow_embedding(report, connector, progress, should_stop)

    def _follow_embedding(
        self,
        report: IngestReport,
        connector: str | None,
        progress: ProgressFn | None,
        should_stop: Callable[[], bool] | None,
    ) -> IngestReport:
        t0 = time.monotonic()
        start = self.client.call(
            "GET", "/v1/context/coverage" + (f"?connector={quote(connector)}" if connector else "")
        )
        prog = IngestProgress(
            connector or "*",
            "embed",
            documents_total=int(start["pending_documents"]),
            chunks_total=int(start["pending_chunks"]),
            note="embedding in the running server" if start["pending_chunks"] else "",
        )
        stopped_since: float | None = None
        cov = start
        while cov["pending_chunks"] > 0:
            if should_stop is not None and should_stop():
                return report.model_copy(
                    update={"embedding": "interrupted", "coverage": self.coverage(connector)}
                )
            if progress is not None:
                progress(prog)
            time.sleep(POLL_SECONDS)
            cov = self.client.call(
                "GET", "/v1/context/coverage" + (f"?connector={quote(connector)}" if connector else "")
            )
            prog.advance(
                chunks=prog.chunks_total - int(cov["pending_chunks"]) - prog.chunks_done,
                documents=prog.documents_total - int(cov["pending_documents"]) - prog.documents_done,
            )
            if cov["embedding"] != "stopped":
                stopped_since = None
                continue
            stopped_since = stopped_since or time.monotonic()
            if time.monotonic() - stopped_since > STOPPED_GRACE_SECONDS:
                why = cov.get("background_error") or "it is not embedding"
                raise IvoaiError(
                    f"the running server holds {cov['pending_chunks']} chunks it is not embedding ({why}); "
                    "they are searchable by their words meanwhile — see its log",
                    code="embedder_failed",
                )
        prog.phase = "embedded"
        if progress is not None:
            progress(prog)
        seconds = round(time.monotonic() - t0, 3)
        connectors = [
            c.model_copy(
                update={
                    "chunks_embedded": c.chunks_embedded
                    + (prog.chunks_done if len(report.connectors) == 1 else 0),
                    "chunks_pending": 0,
                    "embed_seconds": seconds,
                    "seconds": round(c.lexical_seconds + seconds, 3),
                }
            )
            for c in report.connectors
        ]
        return report.model_copy(
            update={"connectors": connectors, "embedding": "done", "coverage": self.coverage(connector)}
        )

    def close(self) -> None:
        """Nothing to release (one connection per request)."""


def gateway_ops(data: ServerDataDir) -> GatewayOps | None:
    """Operations through the gateway serving `data`, or None when none runs (or its socket is gone)."""
    from ivoai.server.runtime.runstate import read_run_state

    if read_run_state(data) is None or not Path(socket_path(data)).exists():
        return None
    return GatewayOps(AdminClient(data))


@contextlib.contextmanager
def open_context_ops(root: Path) -> Iterator[ContextOps]:
    """Context operations on the data directory `root` (see module doc)."""
    data = ServerDataDir(root)
    remote = gateway_ops(data)
    if remote is not None:
        yield remote
        return
    local = LocalOps(data)
    try:
        yield local
    finally:
        local.close()


def interrupted_message(ops: ContextOps) -> str:
    """What an interrupted `ivoai server ingest` kept, and how to continue (one paragraph)."""
    try:
        cov = ops.coverage()
    except IvoaiError:
        return (
            "interrupted: everything committed before the interrupt is kept; run `ivoai server ingest` again"
        )
    kept = (
        f"interrupted: nothing already written is lost; every committed document is searchable, "
        f"{cov.embedded_chunks} of {cov.total_chunks} chunks have dense vectors"
    )
    if cov.pending_chunks == 0:
        return kept + "."
    if ops.via_gateway:
        return (
            kept + f"; the running server keeps embedding the other {cov.pending_chunks} in the background."
        )
    return (
        kept + f", {cov.pending_chunks} wait for them (searched by their words until then). Run `ivoai "
        "server ingest` again to continue where this run stopped, or start the server (`ivoai server "
        "start`): it embeds them in the background."
    )


def cli_memory_embedder(data: ServerDataDir) -> Embedder | None:
    """The embedder a memory command should write with: None while a gateway serves `data` (its
    background work embeds new pages at low priority), else the configured context embedder."""
    from ivoai.server.config import load_config
    from ivoai.server.context.embeddings import make_embedder
    from ivoai.server.runtime.runstate import read_run_state

    if read_run_state(data) is not None:
        return None
    return make_embedder(load_config(data).context, data)


def wake_gateway(data: ServerDataDir) -> bool:
    """Ask the gateway serving `data` to embed new pages or chunks now (False: none answered)."""
    remote = gateway_ops(data)
    if remote is None:
        return False
    try:
        remote.client.call("POST", "/v1/background/wake", {})
    except IvoaiError:
        return False
    return True
