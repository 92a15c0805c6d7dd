"""`ivoai server start --workers N`: N gateway processes accepting on one listening socket.

The parent binds the socket (so `:0` resolves once and every worker serves the same port), records
the run file, then spawns N workers (the `spawn` start method: a fresh interpreter each, no copied
threads or locks) and hands each the socket. Every worker builds its own app and serves with the
gateway's uvicorn settings; the kernel spreads accepted connections over the processes waiting on
the socket. Only worker 0 runs the periodic re-ingestion.

What the workers share is already multi-process safe: the memory database and the context catalog
are SQLite in WAL mode (per-process connections, `BEGIN IMMEDIATE` writers, busy timeouts), and
enrollment and OAuth state are mutated under an exclusive `flock` with atomic replacement. The one
thing that is not shareable is a Qdrant Edge shard (one process holds its lock), so N > 1 requires
services mode (`[context] index = "qdrant"`, a Qdrant server). The Web MCP endpoint `/mcp` keeps
no sessions with N > 1 (`create_app(web_mcp_stateless=True)`): a session lives in the process that
opened it, and a client's next request may be accepted by another worker.

SIGINT/SIGTERM to the parent: it sends SIGTERM to every worker (uvicorn's graceful shutdown), waits
`GRACEFUL_SHUTDOWN_SECONDS` + 5 s, kills what is left, removes the run file and returns. A worker
that dies on its own is started again (at most `RESTARTS_PER_MINUTE` times a minute, then the
parent gives up and stops the rest, so systemd's `Restart=on-failure` takes over).
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path

from ivoai.common.errors import IvoaiError, ValidationError
from ivoai.common.limits import GATEWAY_MAX_WORKERS
from ivoai.server.config import ServerConfig
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir

log = logging.getLogger("ivoai.gateway")
RESTARTS_PER_MINUTE = 10


class WorkersFailed(IvoaiError):
    """Workers kept dying; the gateway stopped."""

    code = "workers_failed"


def check_workers(context: ContextSettings, workers: int) -> None:
    """Refuse a worker count this data directory cannot serve.

    Raises:
        ValidationError: N < 1, N above the limit, or N > 1 with the embedded Qdrant Edge index.
    """
    if workers < 1 or workers > GATEWAY_MAX_WORKERS:
        raise ValidationError(f"--workers must be 1..{GATEWAY_MAX_WORKERS}, got {workers}")
    if workers == 1:
        return
    if context.index != "qdrant":
        raise ValidationError(
            f"--workers {workers} needs services mode: the embedded index (Qdrant Edge) opens its shard in "
            "one process. Switch with `ivoai server init --mode services` (TEI + a Qdrant server) or "
            "start with --workers 1"
        )


def _worker(
    root: str, config: ServerConfig, sock: socket.socket, reingest: bool, web_stateless: bool
) -> None:
    """One worker process: build the app (`/mcp` stateless when there are several workers) and serve
    on the inherited socket until SIGTERM."""
    import uvicorn

    from ivoai.server.app import create_app
    from ivoai.server.logs import attach_log_file
    from ivoai.server.runtime.runner import install_log_redaction, uvicorn_config

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides
    data = ServerDataDir(Path(root))
    attach_log_file(data)
    app = create_app(
        data, config.gateway, context=config.context, reingest=reingest, web_mcp_stateless=web_stateless
    )
    install_log_redaction()
    server = uvicorn.Server(uvicorn_config(app))
    server.run(sockets=[sock])


def serve_workers(
    data: ServerDataDir,
    config: ServerConfig,
    sock: socket.socket,
    workers: int,
    *,
    announce: Callable[[str], None],
) -> None:
    """Run `workers` worker processes on `sock` until SIGINT/SIGTERM (see module doc)."""
    ctx = multiprocessing.get_context("spawn")
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    procs: dict[int, BaseProcess] = {}
    restarts: list[float] = []

    def spawn(index: int) -> None:
        p = ctx.Process(
            target=_worker,
            args=(str(data.root), config, sock, index == 0, workers > 1),
            name=f"ivoai-gateway-worker-{index}",
            daemon=False,
        )
        p.start()
        procs[index] = p

    try:
        for i in range(workers):
            spawn(i)
        announce(f"{workers} workers: pids {' '.join(str(p.pid) for p in procs.values())}")
        while not stopping:
            ready = multiprocessing.connection.wait([p.sentinel for p in procs.values()], timeout=0.5)
            if not ready or stopping:
                continue
            for index, p in list(procs.items()):
                if p.is_alive():
                    continue
                p.join()
                now = time.monotonic()
                restarts[:] = [t for t in restarts if now - t < 60] + [now]
                if len(restarts) > RESTARTS_PER_MINUTE:
                    raise WorkersFailed(
                        f"gateway workers exited {len(restarts)} times within a minute (last status "
                        f"{p.exitcode}); stopping"
                    )
                log.warning(
                    "gateway worker %d (pid %s) exited with %s; starting it again", index, p.pid, p.exitcode
                )
                spawn(index)
    finally:
        _stop_all(list(procs.values()))
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop_all(procs: list[BaseProcess]) -> None:
    from ivoai.server.runtime.runner import GRACEFUL_SHUTDOWN_SECONDS

    for p in procs:
        if p.is_alive() and p.pid is not None:
            os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACEFUL_SHUTDOWN_SECONDS + 5
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(5)
