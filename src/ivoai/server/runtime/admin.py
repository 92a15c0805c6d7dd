"""The local admin socket: the CLI's way into a running gateway (`DIR/run/admin.sock`).

While a gateway serves a data directory it holds the Qdrant Edge shard, so `ivoai server context
search|status` and `ivoai server ingest` cannot open the index themselves; they send the request
here and render the answer exactly as they would their own.

Access control is the file system, not a credential: the socket is created 0600 inside `DIR/run`
(0700), so only the data directory's owner (and root) can connect, and each connection's peer is
checked with SO_PEERCRED (same user or root) before a byte is read. Nothing is reachable over the
network: the socket is a separate uvicorn server on its own thread (`serving.ServerThread`), without
the public routes, and the public listener has no admin route that changes anything. Decision
(issue 13 item 1): a Unix socket instead of a loopback route with a token file, because it needs no
secret at all, works whatever the public listener is (TLS, a non-loopback address, a proxy in
front), and cannot be reached through a reverse proxy by mistake.

Routes (JSON; errors are `{"error": code, "message": ..., "exit_code": n}`):
    GET  /v1/context/status                 health + connector list (as `context status --json`)
    POST /v1/context/search                 {query, limit, connector, path_prefix} -> SearchResponse
    POST /v1/context/ingest                 {connector, embed} -> 202 {job}; phase 1 runs here, phase 2
                                            is the background worker's (woken at once)
    GET  /v1/context/ingest/{job}           {state, progress, report, error}
    GET  /v1/context/coverage?connector=N   Coverage
    POST /v1/background/wake                look for unembedded chunks and memory pages now
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from ivoai.common.errors import IvoaiError, ValidationError
from ivoai.common.ids import random_id
from ivoai.common.limits import ADMIN_SOCKET_BODY_MAX_BYTES, SEARCH_MAX_RESULTS
from ivoai.server.datadir import ServerDataDir
from ivoai.server.gateway.http_api import read_json
from ivoai.server.gateway.services import ServiceHub
from ivoai.server.runtime.serving import ServerDidNotStart, ServerThread

if TYPE_CHECKING:
    from ivoai.server.context.ingest import IngestProgress
    from ivoai.server.runtime.background import BackgroundWork

log = logging.getLogger("ivoai.gateway")

ADMIN_SOCKET = "admin.sock"
SUN_PATH_MAX = 100  # AF_UNIX paths are limited to 107 bytes; longer ones are reached via /proc/self/fd
JOBS_KEPT = 16  # finished ingest jobs remembered for their callers
ADMIN_SOCKET_START_SECONDS = 60.0  # generous: a loaded 2-core CI machine (as the gateway's own start)
STATUS_FOR_CODE = {
    "connector_not_found": 404,
    "document_not_found": 404,
    "ingest_running": 409,
    "index_busy": 503,
    "service_unavailable": 503,
    "embedder_failed": 502,
    "index_failed": 502,
}


def socket_path(data: ServerDataDir) -> str:
    """The admin socket's path (as given to the kernel: see `short_path`)."""
    return str(data.run / ADMIN_SOCKET)


@contextlib.contextmanager
def short_path(data: ServerDataDir) -> Any:
    """A path to the admin socket the kernel accepts: the real one, or one through an open
    descriptor of `DIR/run` (`/proc/self/fd/N/admin.sock`) when the real one is too long."""
    real = socket_path(data)
    if len(real.encode()) <= SUN_PATH_MAX:
        yield real
        return
    fd = os.open(data.run, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{ADMIN_SOCKET}"
    finally:
        os.close(fd)


class _OwnerOnly(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, refusing peers that are not this user (or root)."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        try:
            _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        except (OSError, struct.error, AttributeError):
            uid = -1
        if uid not in (os.getuid(), 0):
            transport.close()


@dataclass
class IngestJob:
    """A phase 1 run started through the socket (phase 2 is the background worker's)."""

    id: str
    connector: str | None
    state: str = "running"  # running | done | failed
    progress: dict[str, Any] | None = None
    report: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    started: float = field(default_factory=time.time)


class AdminSocket:
    """The admin socket server of one gateway (see module doc)."""

    def __init__(self, data: ServerDataDir, hub: ServiceHub, background: BackgroundWork | None) -> None:
        self.data = data
        self.hub = hub
        self.background = background
        self.jobs: dict[str, IngestJob] = {}
        self._jobs_lock = threading.Lock()
        self._serving: ServerThread | None = None

    # ----------------------------------------------------------------------------------- serving
    def start(self) -> bool:
        """Bind and serve; False (logged) when another live gateway already answers on the socket."""
        self.data.ensure()
        with short_path(self.data) as path:
            if _answers(path):
                log.warning("another gateway serves %s; no admin socket for this one", self.data.root)
                return False
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # a dead gateway's socket
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(path)  # inside DIR/run (0700): nobody else can reach it, even before the chmod
            os.chmod(path, 0o600)
        sock.listen(64)
        config = uvicorn.Config(
            self.app(),
            http=_OwnerOnly,
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
            server_header=False,
            date_header=False,
        )
        try:
            self._serving = ServerThread.start(
                config, sock, name="ivoai-admin-socket", timeout=ADMIN_SOCKET_START_SECONDS
            )
        except ServerDidNotStart:
            log.warning("the admin socket of %s did not start", self.data.root)
            self._unlink()
            return False
        return True

    def stop(self) -> None:
        """Stop serving and remove the socket file."""
        if self._serving is not None:
            self._serving.stop(10.0)
            self._serving = None
            self._unlink()

    def _unlink(self) -> None:
        with short_path(self.data) as path, contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    # ------------------------------------------------------------------------------------ routes
    def app(self) -> Starlette:
        """The admin routes (no guard: only the owner can connect)."""
        return Starlette(
            routes=[
                Route("/v1/context/status", _handler(self._status), methods=["GET"]),
                Route("/v1/context/search", _handler(self._search), methods=["POST"]),
                Route("/v1/context/ingest", _handler(self._ingest), methods=["POST"]),
                Route("/v1/context/ingest/{job}", _handler(self._job), methods=["GET"]),
                Route("/v1/context/coverage", _handler(self._coverage), methods=["GET"]),
                Route("/v1/background/wake", _handler(self._wake), methods=["POST"]),
            ]
        )

    async def _status(self, request: Request) -> Response:
        def work() -> dict[str, Any]:
            svc = self.hub.context()
            return {
                "health": svc.context_health().model_dump(mode="json"),
                "connectors": [c.model_dump(mode="json") for c in svc.list_connectors()],
            }

        return JSONResponse(await anyio.to_thread.run_sync(work))

    async def _search(self, request: Request) -> Response:
        body = await read_json(request, ADMIN_SOCKET_BODY_MAX_BYTES)
        if not isinstance(body, dict):
            raise ValidationError("body must be a JSON object")
        query = body.get("query")
        limit = body.get("limit", 10)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= SEARCH_MAX_RESULTS:
            raise ValidationError(f"limit must be an integer between 1 and {SEARCH_MAX_RESULTS}")
        connector, prefix = _optional_str(body, "connector"), _optional_str(body, "path_prefix")

        def work() -> dict[str, Any]:
            svc = self.hub.context()
            res = svc.context_search(str(query or ""), limit=limit, connector=connector, path_prefix=prefix)
            return res.model_dump(mode="json")

        return JSONResponse(await anyio.to_thread.run_sync(work))

    async def _ingest(self, request: Request) -> Response:
        body = await read_json(request, ADMIN_SOCKET_BODY_MAX_BYTES)
        if not isinstance(body, dict):
            raise ValidationError("body must be a JSON object")
        connector = _optional_str(body, "connector")
        embed = bool(body.get("embed", True))
        svc = await anyio.to_thread.run_sync(self.hub.context)
        if connector is not None:
            await anyio.to_thread.run_sync(svc.catalog.connector, connector)  # unknown: 404 now, not later
        job = IngestJob(random_id("job", 8), connector)
        with self._jobs_lock:
            self.jobs[job.id] = job
            for old in sorted(self.jobs.values(), key=lambda j: j.started)[:-JOBS_KEPT]:
                if old.state != "running":
                    del self.jobs[old.id]
        threading.Thread(
            target=self._run_job, args=(job, embed), name="ivoai-admin-ingest", daemon=True
        ).start()
        return JSONResponse({"job": job.id}, status_code=202)

    def _run_job(self, job: IngestJob, embed: bool) -> None:
        def progress(p: IngestProgress) -> None:
            job.progress = _progress_dict(p)

        try:
            report = self.hub.context().ingest(job.connector, progress=progress, embed=False)
            job.report = report.model_dump(mode="json")
            job.state = "done"
        except IvoaiError as exc:
            job.error = {"error": exc.code, "message": exc.message, "exit_code": exc.exit_code}
            job.state = "failed"
        except Exception as exc:
            log.exception("ingest through the admin socket failed")
            job.error = {
                "error": "internal",
                "message": f"ingestion failed: {type(exc).__name__}",
                "exit_code": 1,
            }
            job.state = "failed"
        if embed and self.background is not None:
            self.background.wake()

    async def _job(self, request: Request) -> Response:
        with self._jobs_lock:
            job = self.jobs.get(request.path_params["job"])
        if job is None:
            return _error(404, "not_found", "no such ingest job (the server was restarted?)", 1)
        return JSONResponse(asdict(job))

    async def _wake(self, request: Request) -> Response:
        if self.background is not None:
            self.background.wake()
        return JSONResponse({"woken": self.background is not None})

    async def _coverage(self, request: Request) -> Response:
        connector = request.query_params.get("connector") or None

        def work() -> dict[str, Any]:
            svc = self.hub.context()
            cov = svc.coverage(connector)
            out = cov.model_dump(mode="json")
            out["pending_documents"] = svc.catalog.coverage(connector).pending_documents
            out["background_error"] = self.background.last_error if self.background is not None else None
            return out

        return JSONResponse(await anyio.to_thread.run_sync(work))


def _progress_dict(p: IngestProgress) -> dict[str, Any]:
    return {
        "connector": p.connector,
        "phase": p.phase,
        "documents_done": p.documents_done,
        "documents_total": p.documents_total,
        "chunks_done": p.chunks_done,
        "chunks_total": p.chunks_total,
        "note": p.note,
    }


def _optional_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{key} must be a string")
    return value


def _error(status: int, code: str, message: str, exit_code: int) -> JSONResponse:
    return JSONResponse({"error": code, "message": message, "exit_code": exit_code}, status_code=status)


def _handler(fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            return await fn(request)
        except IvoaiError as exc:
            return _error(STATUS_FOR_CODE.get(exc.code, 400), exc.code, exc.message, exc.exit_code)

    return endpoint


def _answers(path: str) -> bool:
    """Whether something accepts connections on the socket at `path` (a live gateway)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True
