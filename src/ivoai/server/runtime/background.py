"""A running gateway's background work: phase 2 of context ingestion and memory page vectors.

One daemon thread per gateway. Each round it embeds the context chunks still pending (all of them,
batch by batch, in one pass), then memory pages without a current vector (written by `ivoai server
memory write`, the hook intake, or while no embedder ran); when nothing is left it waits, passively,
`CONTEXT_BACKGROUND_POLL_SECONDS` or until woken (an ingest through the admin socket wakes it).

Low priority, so that searches keep their latency:
- with the builtin model, vectors are computed by `EmbedWorkerProcess`, a child process at nice 19:
  the OS gives the cores to the serving process (and everyone else) first;
- before each batch the worker waits until no search is in flight (`ForegroundActivity`, at most
  `CONTEXT_EMBED_YIELD_MAX_SECONDS`, so that a steady stream of searches cannot starve it);
- a failing batch (embedding service or index down) is retried after `CONTEXT_BACKGROUND_RETRY_SECONDS`.

Stopping kills the child in the middle of a batch: that batch is not written, and the next run
continues where this one stopped (nothing already written is embedded again).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from ivoai.common.errors import IvoaiError
from ivoai.common.limits import (
    CONTEXT_BACKGROUND_POLL_SECONDS,
    CONTEXT_BACKGROUND_RETRY_SECONDS,
    CONTEXT_DENSE_BATCH_CHUNKS,
    CONTEXT_EMBED_YIELD_MAX_SECONDS,
)
from ivoai.server.datadir import ServerDataDir
from ivoai.server.gateway.services import ServiceHub, ServiceUnavailable

if TYPE_CHECKING:
    from ivoai.server.context.embed_worker import EmbedWorkerProcess
    from ivoai.server.context.embeddings import Embedder
    from ivoai.server.context.service import ContextService
    from ivoai.server.runtime.admin import AdminSocket

log = logging.getLogger("ivoai.gateway")

MEMORY_BATCH_PAGES = 8  # pages per background memory batch (then context gets its turn again)


class BackgroundWork:
    """The gateway's background embedding thread (see module doc)."""

    def __init__(
        self,
        hub: ServiceHub,
        *,
        poll_seconds: float = CONTEXT_BACKGROUND_POLL_SECONDS,
        retry_seconds: float = CONTEXT_BACKGROUND_RETRY_SECONDS,
        batch_chunks: int = CONTEXT_DENSE_BATCH_CHUNKS,
    ) -> None:
        self.hub = hub
        self.poll_seconds = poll_seconds
        self.retry_seconds = retry_seconds
        self.batch_chunks = batch_chunks
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._worker: EmbedWorkerProcess | None = None
        self._worker_lock = threading.Lock()
        self.rounds = 0  # completed rounds (tests wait on this instead of sleeping)
        self.idle = threading.Event()  # set while nothing is left to embed
        self.last_error: str | None = None

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="ivoai-background-embed", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        """Look for work now (new chunks or pages were written)."""
        self.idle.clear()
        self._wake.set()

    def stop(self) -> None:
        """Stop the thread: a batch in flight is abandoned (not written); the child process ends."""
        self._stop.set()
        self._wake.set()
        with self._worker_lock:
            worker = self._worker
        if worker is not None:
            worker.abort()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None
        if worker is not None:
            worker.close()

    # ------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                did = self.run_once()
                self.last_error = None
            except IvoaiError as exc:
                if self._stop.is_set():
                    return
                self.last_error = f"{exc.code}: {exc.message}"
                log.warning("background embedding paused: %s", self.last_error)
                self._wait(self.retry_seconds)
                continue
            self.rounds += 1
            if not did:
                self.idle.set()
                self._wait(self.poll_seconds)

    def _wait(self, seconds: float) -> None:
        self._wake.wait(seconds)
        self._wake.clear()

    def run_once(self) -> bool:
        """One round: pending context chunks, then one batch of memory pages; True when work was done.

        Raises:
            IvoaiError: a service, the embedder or the index failed (the loop retries later).
        """
        context = self.hub.context()
        did = False
        if context.catalog.coverage().pending:
            stats = context.embed_pending(
                embedder=self._embedder(context),
                batch_chunks=self.batch_chunks,
                before_embed=lambda: context.activity.wait_idle(CONTEXT_EMBED_YIELD_MAX_SECONDS),
                should_stop=self._stop.is_set,
            )
            did = stats.embedded + stats.cached + stats.gone > 0
        if self._stop.is_set():
            return did
        try:
            memory = self.hub.memory()
        except ServiceUnavailable:
            return did  # reported by /ready and the memory tools; context work goes on
        if memory.missing_vectors():
            context.activity.wait_idle(CONTEXT_EMBED_YIELD_MAX_SECONDS)
            did = (
                memory.embed_missing(max_pages=MEMORY_BATCH_PAGES, embedder=self._embedder(context)) > 0
                or did
            )
        return did

    def _embedder(self, context: ContextService) -> Embedder:
        """The low-priority child process for the builtin model; a remote service is used as is."""
        from ivoai.server.context.embeddings import BuiltinEmbedder

        embedder = context.embedder
        if not isinstance(embedder, BuiltinEmbedder):
            return embedder
        from ivoai.server.context.embed_worker import EmbedWorkerProcess

        with self._worker_lock:
            if self._worker is None:
                self._worker = EmbedWorkerProcess()
            return self._worker


def start_local_admin(
    data: ServerDataDir, hub: ServiceHub, work: BackgroundWork | None
) -> AdminSocket | None:
    """Start the background work and the admin socket of a serving gateway (None: not asked for)."""
    if work is None:
        return None
    from ivoai.server.runtime.admin import AdminSocket

    work.start()
    admin = AdminSocket(data, hub, work)
    return admin if admin.start() else None


def stop_local_admin(admin: AdminSocket | None, work: BackgroundWork | None) -> None:
    """Stop the admin socket, then the background work (before the services close)."""
    if admin is not None:
        admin.stop()
    if work is not None:
        work.stop()
