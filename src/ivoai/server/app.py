"""The composition root of the server: settings and a data directory in, one ASGI application out.

Nothing below this module reads configuration or the environment: the `[context]` settings come in
with the gateway's (`server/config.py`, loaded once by the entry point) and are handed down to the
services. `create_app` wires:

    GatewayGuard (transport policy, Host/Origin, 4 MiB bodies, read timeout, no-store)
      └─ Starlette, with one exception handler per error kind (`gateway/errors.py`)
           ├─ /.well-known/ivoai, /health, /ready, /v1/enroll (`http_api.py` handler classes)
           ├─ /v1/memory/hook[/batch], /v1/admin/*   BearerGate(enrollment credentials) → handlers
           ├─ /v1/mcp/context   BearerGate(enrollment credentials) → context MCP (stateless JSON)
           ├─ /v1/memory/mcp    BearerGate(enrollment credentials) → memory MCP (stateless JSON)
           ├─ /mcp              BearerGate(OAuth tokens bound to the /mcp resource) → Web MCP (SSE;
           │                    stateless when several worker processes serve the gateway)
           └─ OAuth: metadata, /authorize, /token, /register, /revoke, /oauth/consent

The lifespan runs the three MCP session managers, warms the services in a worker thread (a
service that fails to open is reported by /ready and by its tools, never fatal), and, when asked,
re-ingests every connector periodically (phase 1), embeds pending chunks and memory pages in the
background and serves the local admin socket (`gateway/background.py`, `gateway/admin.py`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp

from ivoai.common.errors import IvoaiError
from ivoai.common.protocol import (
    SCOPE_CONTEXT_READ,
    SCOPE_MEMORY_DELETE,
    SCOPE_MEMORY_READ,
    SCOPE_MEMORY_WRITE,
)
from ivoai.server.auth.enrollment import EnrollmentStore, NativePrincipal
from ivoai.server.auth.oauth_provider import IvoaiOAuthProvider
from ivoai.server.auth.oauth_store import Clock, OAuthStore
from ivoai.server.auth.principal import Principal
from ivoai.server.config import load_config
from ivoai.server.context.models import IngestReport
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir
from ivoai.server.gateway.bearer import BearerGate
from ivoai.server.gateway.errors import EXCEPTION_HANDLERS
from ivoai.server.gateway.guard import GatewayGuard
from ivoai.server.gateway.http_api import http_routes
from ivoai.server.gateway.mcp_servers import native_context_mount, native_memory_mount, web_mount
from ivoai.server.gateway.oauth_routes import oauth_routes, resource_metadata_url
from ivoai.server.gateway.services import ServiceHub
from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.runtime.background import BackgroundWork, start_local_admin, stop_local_admin

log = logging.getLogger("ivoai.gateway")


@dataclass
class GatewayApp:
    """The built application and the parts tests and the runner need to reach."""

    asgi: ASGIApp
    starlette: Starlette
    settings: GatewaySettings
    hub: ServiceHub
    enrollment: EnrollmentStore
    oauth: OAuthStore
    provider: IvoaiOAuthProvider
    background: BackgroundWork | None = None

    def lifespan(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Run the application's lifespan (for in-process use without a server)."""
        return self.starlette.router.lifespan_context(self.starlette)  # type: ignore[return-value]


def _native(principal: NativePrincipal | None) -> Principal | None:
    if principal is None:
        return None
    return Principal(kind="native", client_id=principal.client_id, scopes=principal.scopes)


def create_app(
    data_dir: ServerDataDir,
    settings: GatewaySettings,
    *,
    hub: ServiceHub | None = None,
    clock: Clock = time.time,
    reingest: bool = False,
    on_reingest: Callable[[IngestReport], None] | None = None,
    extra_hosts: tuple[str, ...] = (),
    background: bool | None = None,
    context: ContextSettings | None = None,
    web_mcp_stateless: bool = False,
) -> GatewayApp:
    """Build the gateway for `data_dir` (see module doc); `background` (default: as `reingest`)
    runs the background embedding and the admin socket.

    `context`: the `[context]` settings the entry point loaded with `settings`; when not given (and
    no `hub` is), they are read from `config.toml` here, the one place below the CLI that does.
    `web_mcp_stateless`: serve `/mcp` without sessions (a worker of `server start --workers N > 1`)."""
    data_dir.ensure()
    if hub is None:
        context = context if context is not None else load_config(data_dir).context
        hub = ServiceHub(data_dir, context_settings=context)
    enrollment = EnrollmentStore(data_dir.root, data_dir.enrollment, clock=clock)
    oauth = OAuthStore(data_dir.root, data_dir.oauth, clock=clock)
    provider = IvoaiOAuthProvider(oauth, issuer=settings.base_url, resource=settings.mcp_resource_url)
    started_at = time.monotonic()
    work = BackgroundWork(hub) if (reingest if background is None else background) else None

    def verify_native(token: str) -> Principal | None:
        return _native(enrollment.verify(token))

    context_mount = native_context_mount(hub)
    memory_mount = native_memory_mount(hub)
    web = web_mount(hub, stateless=web_mcp_stateless)
    memory_scopes = (SCOPE_MEMORY_READ, SCOPE_MEMORY_WRITE, SCOPE_MEMORY_DELETE)
    routes: list[Any] = [
        *http_routes(settings, hub, enrollment, verify_native, started_at),
        Route(
            "/v1/mcp/context",
            BearerGate(context_mount.endpoint, verify_native, any_of_scopes=(SCOPE_CONTEXT_READ,)),
        ),
        Route(
            "/v1/memory/mcp", BearerGate(memory_mount.endpoint, verify_native, any_of_scopes=memory_scopes)
        ),
        Route(
            "/mcp",
            BearerGate(
                web.endpoint,
                provider.verify_principal,
                any_of_scopes=(),
                resource_metadata_url=resource_metadata_url(settings.base_url),
            ),
        ),
        *oauth_routes(provider),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        admin: Any = None  # the local admin socket, when `background` runs
        async with (
            context_mount.manager.run(),
            memory_mount.manager.run(),
            web.manager.run(),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(anyio.to_thread.run_sync, hub.warm)
            if reingest:
                tg.start_soon(_reingest_loop, hub, settings.reingest_interval_seconds, on_reingest, work)
            admin = await anyio.to_thread.run_sync(start_local_admin, data_dir, hub, work)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
        # outside the cancelled task group, and before the services close under the background work
        await anyio.to_thread.run_sync(stop_local_admin, admin, work)
        await anyio.to_thread.run_sync(hub.close)

    starlette = Starlette(routes=routes, lifespan=lifespan, exception_handlers=EXCEPTION_HANDLERS)
    asgi = GatewayGuard(starlette, settings, extra_hosts=extra_hosts)
    return GatewayApp(
        asgi=asgi,
        starlette=starlette,
        settings=settings,
        hub=hub,
        enrollment=enrollment,
        oauth=oauth,
        provider=provider,
        background=work,
    )


async def _reingest_loop(
    hub: ServiceHub,
    interval: int,
    on_reingest: Callable[[IngestReport], None] | None,
    work: BackgroundWork | None = None,
) -> None:
    """Re-ingest (phase 1) every connector every `interval` seconds, then wake the background
    embedding; failures are logged and retried next time."""
    while True:
        await anyio.sleep(interval)
        try:
            context = await anyio.to_thread.run_sync(hub.context)
            report = await anyio.to_thread.run_sync(functools.partial(context.ingest, embed=work is None))
            if work is not None:
                work.wake()
        except IvoaiError as exc:
            log.warning("periodic re-ingestion skipped: %s: %s", exc.code, exc.message)
            continue
        log.info("periodic re-ingestion %s: %s", report.run_id, report.status)
        if on_reingest is not None:
            on_reingest(report)
