"""Plain HTTP endpoints: discovery, health, readiness, enrollment, memory hooks, read-only admin.

Each endpoint is a handler class in the MCP SDK's `TokenHandler` style: its dependencies in the
constructor, one `async handle(request) -> Response`. `http_routes` mounts them; the authenticated
ones go behind the one bearer gate (`bearer.authenticated`), which attaches the caller's principal.
A handler raises `IvoaiError`s; the app's one exception handler renders them as JSON
`{"error": <stable code>, "message": <one line>}` with the status the error class carries
(`errors.py`). Responses are `no-store` (applied by the guard). Request bodies are bounded per
endpoint before parsing; non-streaming handlers end after `HTTP_HANDLER_TIMEOUT_SECONDS` (504).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread
from pydantic import ValidationError as PydanticValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ivoai import __version__
from ivoai.common.errors import TooLargeError, ValidationError
from ivoai.common.limits import ENROLL_BODY_MAX_BYTES, HTTP_BODY_MAX_BYTES, HTTP_HANDLER_TIMEOUT_SECONDS
from ivoai.common.protocol import (
    DISCOVERY_PATH,
    PROTOCOL_VERSION,
    SCOPE_CONNECTOR_READ,
    SCOPE_DOCTOR_READ,
    SCOPE_MEMORY_WRITE,
    SCOPE_STATUS_READ,
    DiscoveryDocument,
    EnrollRequest,
)
from ivoai.server.auth.enrollment import EnrollmentStore
from ivoai.server.gateway.bearer import Verifier, authenticated
from ivoai.server.gateway.errors import HandlerTimeout
from ivoai.server.gateway.services import ServiceHub
from ivoai.server.gateway.settings import GatewaySettings

Handler = Callable[[Request], Awaitable[Response]]


async def read_json(request: Request, limit: int) -> Any:
    """The request's JSON body, at most `limit` bytes.

    Raises:
        TooLargeError, ValidationError (code `invalid`): oversize, wrong content type or not JSON.
    """
    if not request.headers.get("content-type", "").lower().startswith("application/json"):
        raise ValidationError("Content-Type must be application/json")
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            raise TooLargeError(f"request body exceeds {limit} bytes")
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nesting too deep
        raise ValidationError("request body is not valid JSON") from None


def bounded(handler: Handler) -> Handler:
    """`handler` under the handler deadline.

    Raises:
        HandlerTimeout: the handler ran longer than HTTP_HANDLER_TIMEOUT_SECONDS (answered 504).
    """

    async def endpoint(request: Request) -> Response:
        try:
            with anyio.fail_after(HTTP_HANDLER_TIMEOUT_SECONDS):
                return await handler(request)
        except TimeoutError:
            raise HandlerTimeout(f"the request took longer than {HTTP_HANDLER_TIMEOUT_SECONDS:g} s") from None

    return endpoint


def discovery_document(settings: GatewaySettings) -> DiscoveryDocument:
    """The protocol-1 discovery document (exactly the seed's fields)."""
    return DiscoveryDocument(
        protocol_version=PROTOCOL_VERSION, server_version=__version__, public_base_url=settings.base_url
    )


class DiscoveryHandler:
    """`GET /.well-known/ivoai`: the discovery document."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.document = discovery_document(settings).model_dump(mode="json")

    async def handle(self, request: Request) -> Response:
        return JSONResponse(self.document)


class HealthHandler:
    """`GET /health`: liveness only."""

    async def handle(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "server_version": __version__})


class ReadyHandler:
    """`GET /ready`: both services' state; 503 when the context service is down."""

    def __init__(self, hub: ServiceHub) -> None:
        self.hub = hub

    async def handle(self, request: Request) -> Response:
        report = await anyio.to_thread.run_sync(self.hub.readiness)
        return JSONResponse(report, status_code=503 if report["status"] == "not_ready" else 200)


class EnrollHandler:
    """`POST /v1/enroll`: a one-time code in a JSON body for a client credential (once)."""

    def __init__(self, enrollment: EnrollmentStore) -> None:
        self.enrollment = enrollment

    async def handle(self, request: Request) -> Response:
        try:
            payload = EnrollRequest.model_validate(await read_json(request, ENROLL_BODY_MAX_BYTES))
        except PydanticValidationError:
            raise ValidationError(
                'body must be {"code": "<enrollment code>"} (code: 1..256 characters)'
            ) from None
        response = await anyio.to_thread.run_sync(self.enrollment.exchange, payload.code)
        return JSONResponse(response.model_dump(mode="json"))


class HookHandler:
    """`POST /v1/memory/hook` (one event) and `/v1/memory/hook/batch` (`batch=True`)."""

    def __init__(self, hub: ServiceHub, *, batch: bool) -> None:
        self.hub = hub
        self.batch = batch

    async def handle(self, request: Request) -> Response:
        payload = await read_json(request, HTTP_BODY_MAX_BYTES)
        memory = await anyio.to_thread.run_sync(self.hub.memory)
        apply = memory.hook_batch if self.batch else memory.hook_event
        result = await anyio.to_thread.run_sync(apply, payload)
        return JSONResponse(result.model_dump(mode="json"))


class AdminHandler:
    """The read-only admin allowlist: typed summaries, never server paths, no shell, no proxy."""

    def __init__(self, hub: ServiceHub, settings: GatewaySettings, started_at: float) -> None:
        self.hub = hub
        self.settings = settings
        self.started_at = started_at

    async def status(self, request: Request) -> Response:
        """`GET /v1/admin/status`: versions, readiness and uptime."""
        report = await anyio.to_thread.run_sync(self.hub.readiness)
        uptime = round(time.monotonic() - self.started_at, 1)
        return JSONResponse(
            {
                "server_version": __version__,
                "protocol_version": PROTOCOL_VERSION,
                "status": report["status"],
                "uptime_seconds": uptime,
            }
        )

    async def doctor(self, request: Request) -> Response:
        """`GET /v1/admin/doctor`: the readiness checks and the transport settings."""
        report = await anyio.to_thread.run_sync(self.hub.readiness)
        transport = {"tls": self.settings.tls, "trusted_proxies": len(self.settings.trusted_proxies)}
        return JSONResponse({"status": report["status"], "checks": report["checks"], "transport": transport})

    async def connectors(self, request: Request) -> Response:
        """`GET /v1/admin/connectors`: names and counts (a remote reader learns no server path)."""
        context = await anyio.to_thread.run_sync(self.hub.context)
        connectors = await anyio.to_thread.run_sync(context.list_connectors)
        fields = ("name", "type", "state", "documents", "bytes")
        return JSONResponse({"connectors": [{f: getattr(c, f) for f in fields} for c in connectors]})


def http_routes(
    settings: GatewaySettings,
    hub: ServiceHub,
    enrollment: EnrollmentStore,
    verify_native: Verifier,
    started_at: float,
) -> list[Route]:
    """Discovery, health, ready, enroll, hooks and the admin allowlist."""

    def native(handler: Handler, scope: str) -> Any:
        return authenticated(bounded(handler), verify_native, scope)

    hook, batch = HookHandler(hub, batch=False), HookHandler(hub, batch=True)
    admin = AdminHandler(hub, settings, started_at)
    return [
        Route(DISCOVERY_PATH, DiscoveryHandler(settings).handle, methods=["GET"]),
        Route("/health", HealthHandler().handle, methods=["GET"]),
        Route("/ready", ReadyHandler(hub).handle, methods=["GET"]),
        Route("/v1/enroll", bounded(EnrollHandler(enrollment).handle), methods=["POST"]),
        Route("/v1/memory/hook", native(hook.handle, SCOPE_MEMORY_WRITE), methods=["POST"]),
        Route("/v1/memory/hook/batch", native(batch.handle, SCOPE_MEMORY_WRITE), methods=["POST"]),
        Route("/v1/admin/status", native(admin.status, SCOPE_STATUS_READ), methods=["GET"]),
        Route("/v1/admin/doctor", native(admin.doctor, SCOPE_DOCTOR_READ), methods=["GET"]),
        Route("/v1/admin/connectors", native(admin.connectors, SCOPE_CONNECTOR_READ), methods=["GET"]),
    ]
