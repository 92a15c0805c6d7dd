"""The backing services as the gateway sees them: opened in isolation, never fatal to the gateway.

`ServiceHub` opens the context and memory services in worker threads. A service that fails to
open is recorded with its error and re-opened on demand at most every `SERVICE_RETRY_SECONDS`;
until then its tools answer a clean `service_unavailable` error while the other service, discovery,
enrollment and OAuth keep working. `/ready` reads the same state.

Both services share one embedder (the context service's, created lazily), so the bundled model is
loaded once per process.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ivoai.common.errors import IvoaiError
from ivoai.common.limits import SERVICE_RETRY_SECONDS
from ivoai.server.datadir import ServerDataDir

if TYPE_CHECKING:
    from ivoai.server.context.embeddings import Embedder
    from ivoai.server.context.service import ContextService
    from ivoai.server.context.settings import ContextSettings
    from ivoai.server.memory.service import MemoryService

log = logging.getLogger("ivoai.gateway")


class ServiceUnavailable(IvoaiError):
    """A backing service could not be opened; the message says which and why (secret-free)."""

    code = "service_unavailable"
    http_status = 503
    retry_after_seconds = int(SERVICE_RETRY_SECONDS)  # the failed service is re-opened after this


class _Closable(Protocol):
    def close(self) -> None: ...


@dataclass
class _Slot:
    name: str
    opener: Callable[[], Any]
    instance: Any = None
    error: str | None = None
    failed_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self) -> Any:
        with self.lock:
            if self.instance is not None:
                return self.instance
            if self.error is not None and time.monotonic() - self.failed_at < SERVICE_RETRY_SECONDS:
                raise ServiceUnavailable(f"{self.name} service unavailable: {self.error}")
            try:
                self.instance = self.opener()
                self.error = None
            except Exception as exc:  # noqa: BLE001 - any failure to open is isolated and reported
                self.error = f"{type(exc).__name__}: {exc}"[:300]
                self.failed_at = time.monotonic()
                log.warning("%s service failed to open: %s", self.name, self.error)
                raise ServiceUnavailable(f"{self.name} service unavailable: {self.error}") from None
            return self.instance


class _SharedEmbedder:
    """An Embedder that defers to the context service's embedder, created on first use."""

    dimensions = 384

    def __init__(self, hub: ServiceHub) -> None:
        self._hub = hub

    def _real(self) -> Embedder:
        return self._hub.context().embedder

    @property
    def name(self) -> str:
        return self._real().name

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return self._real().embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return self._real().embed_passages(texts)


class ServiceHub:
    """Lazily opened, failure-isolated context and memory services for one data directory."""

    def __init__(
        self,
        data_dir: ServerDataDir,
        *,
        context: ContextService | None = None,
        memory: MemoryService | None = None,
        embedder: Embedder | None = None,
        context_opener: Callable[[], ContextService] | None = None,
        memory_opener: Callable[[], MemoryService] | None = None,
        close_given: bool = False,
        context_settings: ContextSettings | None = None,
    ) -> None:
        """`close_given`: the hub also closes the `context`/`memory` instances passed in;
        `context_settings`: the `[context]` table the composition root loaded (default: defaults)."""
        self.data_dir = data_dir
        self.context_settings = context_settings
        self._embedder = embedder
        self._owned: list[_Closable] = [s for s in (context, memory) if close_given and s is not None]
        self._context = _Slot("context", context_opener or self._open_context, instance=context)
        self._memory = _Slot("memory", memory_opener or self._open_memory, instance=memory)

    def _open_context(self) -> ContextService:
        from ivoai.server.context.service import ContextService
        from ivoai.server.context.settings import ContextSettings

        settings = self.context_settings or ContextSettings()
        svc = ContextService.open(self.data_dir, settings, embedder=self._embedder)
        self._owned.append(svc)
        return svc

    def _open_memory(self) -> MemoryService:
        from ivoai.server.memory.service import MemoryService

        embedder: Any = self._embedder if self._embedder is not None else _SharedEmbedder(self)
        svc = MemoryService.open(self.data_dir, embedder=embedder)
        self._owned.append(svc)
        return svc

    def context(self) -> ContextService:
        """The context service, or ServiceUnavailable."""
        svc: ContextService = self._context.get()
        return svc

    def memory(self) -> MemoryService:
        """The memory service, or ServiceUnavailable."""
        svc: MemoryService = self._memory.get()
        return svc

    def warm(self) -> None:
        """Try to open both services now (errors are recorded, not raised)."""
        for slot in (self._context, self._memory):
            with contextlib.suppress(ServiceUnavailable):
                slot.get()

    def readiness(self) -> dict[str, Any]:
        """`ready`, `ready_degraded` (memory down) or `not_ready` (context down), with reasons."""
        checks: dict[str, Any] = {}
        context_ok = False
        try:
            health = self.context().context_health()
            context_ok = health.status == "ok"
            checks["context"] = {"status": health.status, "documents": health.documents}
        except IvoaiError as exc:
            checks["context"] = {"status": "unavailable", "error": exc.message}
        memory_ok = False
        try:
            self.memory().memory_status()
            memory_ok = True
            checks["memory"] = {"status": "ok"}
        except IvoaiError as exc:
            checks["memory"] = {"status": "unavailable", "error": exc.message}
        status = "ready" if context_ok and memory_ok else "ready_degraded" if context_ok else "not_ready"
        return {"status": status, "checks": checks}

    def close(self) -> None:
        """Close the services this hub opened."""
        for svc in reversed(self._owned):
            try:
                svc.close()
            except Exception as exc:  # noqa: BLE001 - shutdown must visit every service
                log.warning("closing a service failed: %s", exc)
        self._owned.clear()
