"""Serving the gateway with uvicorn: foreground (`ivoai server start`) or in a background thread.

Server-level bounds (uvicorn): keep-alive idle timeout, maximum header size, a concurrency limit
(503 beyond it) and a graceful-shutdown deadline; `HeaderTimeoutH11` adds the header deadline
uvicorn lacks (a request head must be complete within `HTTP_HEADER_TIMEOUT_SECONDS` of the
connection or of the previous response, however slowly it trickles in); the guard adds the 4 MiB
body bound and the read and write timeouts.

The socket is bound before the application is built, so a `:0` listener knows its port and the
canonical public URL (and therefore the OAuth issuer and `/mcp` resource) is right from the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import uvicorn
from starlette.types import ASGIApp

from ivoai.common.errors import IvoaiError
from ivoai.common.limits import (
    HTTP_HEADER_MAX_BYTES,
    HTTP_HEADER_TIMEOUT_SECONDS,
    HTTP_IDLE_TIMEOUT_SECONDS,
    HTTP_MAX_CONCURRENCY,
)
from ivoai.common.redact import redact
from ivoai.server.app import GatewayApp, create_app
from ivoai.server.config import ServerConfig
from ivoai.server.datadir import ServerDataDir
from ivoai.server.gateway.http11 import StrictFramingH11
from ivoai.server.gateway.services import ServiceHub
from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.runtime.runstate import clear_run_state, write_run_state
from ivoai.server.runtime.serving import ServerThread

GRACEFUL_SHUTDOWN_SECONDS = 10.0  # open SSE streams are cut after this on Ctrl-C
STARTUP_TIMEOUT_SECONDS = 60.0  # generous: a loaded 2-core CI machine


class BindError(IvoaiError):
    """The listen address could not be bound."""

    code = "bind_failed"


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket (IPv6 when `host` contains a colon).

    Raises:
        BindError: the address is in use or not available.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit TCP_NODELAY. Without it, uvicorn's header-then-body writes meet the
    # client's delayed ACK and every keep-alive request stalls ~40 ms (measured by the router bench).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise BindError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class HeaderTimeoutH11(StrictFramingH11):
    """uvicorn's h11 protocol (with the framing policy of `http11.py`) plus a deadline for each request
    head (slow-header defence)."""

    header_timeout: float = HTTP_HEADER_TIMEOUT_SECONDS
    _head_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_expired)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_expired(self) -> None:
        self._head_timer = None
        idle = self.cycle is None or self.cycle.response_complete
        if idle and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not None and self.cycle is not before:
            self._disarm()  # a complete request head arrived

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def uvicorn_config(app: GatewayApp, *, header_timeout: float = HTTP_HEADER_TIMEOUT_SECONDS) -> uvicorn.Config:
    """uvicorn settings for the gateway (see module doc)."""
    return server_config(app.asgi, app.settings, header_timeout=header_timeout)


def server_config(
    asgi: ASGIApp, s: GatewaySettings, *, header_timeout: float = HTTP_HEADER_TIMEOUT_SECONDS
) -> uvicorn.Config:
    """The gateway's uvicorn settings for any ASGI app (the benchmark serves its reference with them)."""
    protocol = type("GatewayH11", (HeaderTimeoutH11,), {"header_timeout": header_timeout})
    return uvicorn.Config(
        asgi,
        http=protocol,
        ssl_certfile=str(s.tls_cert) if s.tls_cert else None,
        ssl_keyfile=str(s.tls_key) if s.tls_key else None,
        timeout_keep_alive=int(HTTP_IDLE_TIMEOUT_SECONDS),
        h11_max_incomplete_event_size=HTTP_HEADER_MAX_BYTES,
        limit_concurrency=HTTP_MAX_CONCURRENCY,
        timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN_SECONDS),
        proxy_headers=False,  # the guard decides trust in X-Forwarded-Proto itself
        server_header=False,
        date_header=False,
        log_level="warning",
        access_log=False,
        lifespan="on",
    )


class RedactingFilter(logging.Filter):
    """Pass every log record through ivoai's redactor (credentials, codes, bearer headers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        return True


def install_log_redaction() -> None:
    """Redact every record any root handler emits (server logs go to journald/stderr)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


def serve_forever(
    data: ServerDataDir, config: ServerConfig, *, announce: Callable[[str], None], workers: int = 1
) -> None:
    """Bind, build, serve until SIGINT/SIGTERM; record the run in `run/gateway.json` meanwhile.

    `workers` > 1 serves from that many processes on the one socket (`gateway/workers.py`).
    """
    from ivoai.server.logs import attach_log_file

    attach_log_file(data)
    shown = announce

    def logged(message: str) -> None:
        shown(message)
        logging.getLogger("ivoai.gateway").info("%s", message)

    announce = logged

    sock = bind(config.gateway.listen_host, config.gateway.listen_port)
    port = sock.getsockname()[1]
    settings = config.gateway.with_port(port)
    if workers > 1:
        from ivoai.server.runtime.workers import serve_workers

        listen = f"{settings.listen_host}:{port}"
        write_run_state(data, listen=listen, base_url=settings.base_url, workers=workers)
        announce(f"ivoai server listening on {settings.listen_host}:{port}; public URL {settings.base_url}")
        try:
            serve_workers(data, replace(config, gateway=settings), sock, workers, announce=announce)
            announce("ivoai server stopped")
        finally:
            clear_run_state(data)
            sock.close()
        return
    app = create_app(data, settings, context=config.context, reingest=True)
    install_log_redaction()
    server = uvicorn.Server(uvicorn_config(app))
    write_run_state(data, listen=f"{settings.listen_host}:{port}", base_url=settings.base_url)
    announce(f"ivoai server listening on {settings.listen_host}:{port}; public URL {settings.base_url}")
    announce(f"Web MCP: {settings.mcp_resource_url}   stop with Ctrl-C")
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal with the previous
    # handlers restored: ours turn that into a normal return (exit status 0, run file removed).
    previous = {sig: signal.signal(sig, _stopped) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    except _Stopped:
        announce("ivoai server stopped")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        clear_run_state(data)
        sock.close()


class _Stopped(Exception):
    """Raised by the signal handler once uvicorn has finished its graceful shutdown."""


def _stopped(signum: int, frame: object) -> None:
    raise _Stopped


@dataclass
class RunningServer:
    """A gateway serving from a background thread (tests, quickstart, benchmarks)."""

    app: GatewayApp
    serving: ServerThread

    @property
    def url(self) -> str:
        return self.app.settings.base_url

    @property
    def server(self) -> uvicorn.Server:
        return self.serving.server

    def stop(self) -> None:
        """Ask uvicorn to exit and wait for the thread."""
        self.serving.stop(GRACEFUL_SHUTDOWN_SECONDS + 5)


def start_background(
    data: ServerDataDir,
    settings: GatewaySettings,
    *,
    hub: ServiceHub | None = None,
    build: Callable[[ServerDataDir, GatewaySettings], GatewayApp] | None = None,
    header_timeout: float = HTTP_HEADER_TIMEOUT_SECONDS,
    reingest: bool = False,
    background: bool | None = None,
) -> RunningServer:
    """Serve in a daemon thread on `settings` (port 0 picks a free port); return once it accepts requests.

    `background` (default: as `reingest`): embed pending chunks and pages, and serve the admin socket.

    Raises:
        BindError: the address could not be bound.
        ServerDidNotStart: the server did not start within the startup timeout (a RuntimeError).
    """
    sock = bind(settings.listen_host, settings.listen_port)
    settings = settings.with_port(sock.getsockname()[1])
    app = (
        build(data, settings)
        if build is not None
        else create_app(data, settings, hub=hub, reingest=reingest, background=background)
    )
    config = uvicorn_config(app, header_timeout=header_timeout)
    serving = ServerThread.start(config, sock, name="ivoai-gateway", timeout=STARTUP_TIMEOUT_SECONDS)
    return RunningServer(app=app, serving=serving)


@contextlib.contextmanager
def running(
    data: ServerDataDir, settings: GatewaySettings, *, hub: ServiceHub | None = None
) -> Iterator[RunningServer]:
    """`start_background` as a context manager."""
    srv = start_background(data, settings, hub=hub)
    try:
        yield srv
    finally:
        srv.stop()


logging.getLogger("mcp").setLevel(logging.WARNING)
