"""The per-session KnowledgeRouter: one loopback MCP server in front of every selected knowledge source.

`start_session_router()` binds `127.0.0.1:0`, serves MCP Streamable HTTP at `/mcp` behind a random
capability token (checked in constant time), and runs its event loop in a daemon thread of the
calling process. Upstream credentials stay in that process; each is sent only to its own profile's
origin (see `upstream.OriginBoundTransport`).

Routing, per tool call:
- reads (`context_*`, and the read tools of `memory_*`) fan out concurrently to every candidate source
  (or to those named by the optional `knowledge_source` argument) with a per-source deadline, fail
  over only between replicas of the same source, and merge deterministically (see `merge`); with a
  single candidate the upstream answer is passed through unchanged;
- writes (and any tool the router does not know to be read-only) need exactly one logical
  destination, go to that source's primary only, and are never retried once the request may have
  reached the server: the caller gets an explicit "outcome uncertain" error instead.
A circuit breaker per server opens after repeated failures and skips that server while open.

This module never imports `ivoai.server`; the MCP server stack is imported only when a router starts.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ivoai.client.knowledge.errors import KnowledgeError, NoSourcesError
from ivoai.client.knowledge.profiles import KnowledgeSource, ServerProfile, build_sources, select_sources
from ivoai.client.knowledge.settings import (
    READ_TOOLS,
    ROUTER_HOST,
    ROUTER_PATH,
    ROUTER_START_TIMEOUT_SECONDS,
    ROUTER_STOP_TIMEOUT_SECONDS,
    SOURCE_ARG,
    STATUS_TOOL,
    WRITE_TOOLS,
    RouterConfig,
)
from ivoai.common.paths import XdgPaths, xdg_paths

if TYPE_CHECKING:
    from ivoai.client.knowledge.core import KnowledgeRouter

__all__ = [
    "READ_TOOLS",
    "SOURCE_ARG",
    "STATUS_TOOL",
    "WRITE_TOOLS",
    "RouterConfig",
    "RouterHandle",
    "enabled_sources",
    "session_router",
    "start_router",
    "start_session_router",
]

log = logging.getLogger(__name__)


@dataclass
class RouterHandle:
    """A running router: `url`, `token` (never log it), `sources`; `close()` stops it."""

    url: str
    token: str = field(repr=False)
    sources: list[KnowledgeSource]
    router: KnowledgeRouter = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _stop: Any = field(repr=False)

    def close(self) -> None:
        """Stop the listener and drop every upstream session; idempotent."""
        self._stop()
        self._thread.join(ROUTER_STOP_TIMEOUT_SECONDS)

    def __enter__(self) -> RouterHandle:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _load_profiles_and_credentials(paths: XdgPaths) -> tuple[list[ServerProfile], dict[str, str]]:
    from ivoai.client.config.secrets import SecretsStore
    from ivoai.client.connections.registry import ConnectionRegistry

    state = ConnectionRegistry(paths).load()
    store = SecretsStore(paths)
    creds: dict[str, str] = {}
    for profile in state.servers:
        if profile.enabled:
            value = store.get(profile.id)
            if value:
                creds[profile.id] = value
    return state.servers, creds


def enabled_sources(paths: XdgPaths | None = None) -> list[KnowledgeSource]:
    """The sources an unfiltered session would federate (empty: start no router)."""
    from ivoai.client.connections.files import REGISTRY_FILE

    paths = paths or xdg_paths()
    if not (paths.config / REGISTRY_FILE).exists():  # nothing enrolled: skip importing pydantic
        return []
    from ivoai.client.connections.registry import ConnectionRegistry

    return build_sources(ConnectionRegistry(paths).load().servers)


def start_router(
    sources: Sequence[KnowledgeSource], credentials: Mapping[str, str], config: RouterConfig | None = None
) -> RouterHandle:
    """Start a router for exactly these sources in a daemon thread; return once it accepts connections.

    Raises:
        KnowledgeError: the listener could not start.
    """
    import anyio
    import uvicorn

    from ivoai.client.knowledge.core import KnowledgeRouter, build_asgi_app
    from ivoai.common.ids import random_token

    router = KnowledgeRouter(sources, credentials, config)
    token = random_token(32)
    app = build_asgi_app(router, token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit TCP_NODELAY; without it uvicorn's two-part responses stall on the
    # client's delayed ACK (~40 ms per call, measured here).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((ROUTER_HOST, 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    ready = threading.Event()
    failure: list[BaseException] = []

    class _Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            ready.set()

    _quiet_libraries()
    uv_config = uvicorn.Config(
        app,
        log_config=None,  # never install uvicorn's stderr handlers: the agent's TUI owns the terminal
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=1,
        h11_max_incomplete_event_size=64 * 1024,
    )
    server = _Server(uv_config)

    async def main() -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            with anyio.CancelScope(shield=True):
                await router.aclose()

    def run() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread, never raised in this one
            failure.append(exc)
        finally:
            ready.set()
            with contextlib.suppress(OSError):
                sock.close()

    thread = threading.Thread(target=run, name="ivoai-knowledge-router", daemon=True)
    thread.start()
    if not ready.wait(ROUTER_START_TIMEOUT_SECONDS) or failure or not server.started:
        server.should_exit = True
        thread.join(ROUTER_STOP_TIMEOUT_SECONDS)
        reason = type(failure[0]).__name__ if failure else "timed out"
        raise KnowledgeError(f"the knowledge router could not start ({reason})")

    def stop() -> None:
        server.should_exit = True

    return RouterHandle(
        f"http://{ROUTER_HOST}:{port}{ROUTER_PATH}", token, list(sources), router, thread, stop
    )


_QUIET_LOGGERS = ("mcp", "uvicorn", "httpx2", "httpcore2", "ivoai.client.knowledge")


def _quiet_libraries() -> None:
    """Keep library log records off the terminal the official client draws on.

    A NullHandler stops Python's last-resort stderr handler; records still propagate to whatever
    handlers the host application configured on the root logger.
    """
    for name in _QUIET_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())


def start_session_router(
    selectors: Sequence[str] = (), *, paths: XdgPaths | None = None, config: RouterConfig | None = None
) -> RouterHandle:
    """Start the session's router over the selected (default: every enabled) source.

    Raises:
        UnknownSourceError / DisabledSourceError: a selector names nothing usable (message lists choices).
        NoSourcesError: there is no enabled source (check `enabled_sources()` first).
    """
    profiles, credentials = _load_profiles_and_credentials(paths or xdg_paths())
    sources = select_sources(profiles, selectors)
    usable: list[KnowledgeSource] = []
    for source in sources:
        members = tuple(p for p in source.members if p.id in credentials)
        if members:
            usable.append(
                KnowledgeSource(source.id, source.alias, source.purpose, source.redundancy_group, members)
            )
        else:
            log.warning("knowledge source %s has no stored credential; re-enroll it", source.id)
    if not usable:
        raise NoSourcesError(
            "no enabled knowledge source with a credential; enroll one with "
            "`ivoai connect server add ALIAS --url URL --code-stdin`"
        )
    return start_router(usable, credentials, config)


@contextlib.contextmanager
def session_router(
    selectors: Sequence[str] = (), *, paths: XdgPaths | None = None, config: RouterConfig | None = None
) -> Iterator[RouterHandle]:
    """`with session_router(...) as handle:` for callers that prefer a context manager."""
    handle = start_session_router(selectors, paths=paths, config=config)
    try:
        yield handle
    finally:
        handle.close()
