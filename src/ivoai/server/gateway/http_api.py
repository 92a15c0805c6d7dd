"""Plain HTTP endpoints: discovery, health, readiness, enrollment, memory hooks, read-only admin.

Errors are JSON `{"error": <stable code>, "message": <one line>}`; responses are `no-store`
(applied by the guard). Request bodies are bounded per endpoint before parsing.
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
from ivoai.common.errors import IvoaiError, TooLargeError
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
from ivoai.server.auth.enrollment import EnrollmentRejected, EnrollmentStore
from ivoai.server.auth.principal import Principal
from ivoai.server.gateway.services import ServiceHub, ServiceUnavailable
from ivoai.server.gateway.settings import GatewaySettings

Verifier = Callable[[str], Principal | None]
Handler = Callable[[Request], Awaitable[Response]]

STATUS_FOR_CODE = {
    "enrollment_rejected": 400,
    "invalid": 400,
    "usage": 400,
    "not_found": 404,
    "conflict": 409,
    "too_large": 413,
    "service_unavailable": 503,
}


def error(status: int, code: str, message: str) -> JSONResponse:
    """A JSON error body with a stable code."""
    return JSONResponse({"error": code, "message": message}, status_code=status)


def _from_exc(exc: IvoaiError) -> JSONResponse:
    return error(STATUS_FOR_CODE.get(exc.code, 400), exc.code, exc.message)


async def read_json(request: Request, limit: int) -> Any:
    """The request's JSON body, at most `limit` bytes.

    Raises:
        TooLargeError, ValidationError (code `invalid`): oversize, wrong content type or not JSON.
    """
    from ivoai.common.errors import ValidationError

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


async def _bounded(handler: Handler, request: Request) -> Response:
    """Run a non-streaming handler under the handler deadline (504 after it)."""
    try:
        with anyio.fail_after(HTTP_HANDLER_TIMEOUT_SECONDS):
            return await handler(request)
    except TimeoutError:
        return error(504, "timeout", f"the request took longer than {HTTP_HANDLER_TIMEOUT_SECONDS:g} s")


def discovery_document(settings: GatewaySettings) -> DiscoveryDocument:
    """The protocol-1 discovery document (exactly the seed's fields)."""
    return DiscoveryDocument(
        protocol_version=PROTOCOL_VERSION, server_version=__version__, public_base_url=settings.base_url
    )


def build_http_routes(
    settings: GatewaySettings,
    hub: ServiceHub,
    enrollment: EnrollmentStore,
    verify_native: Verifier,
    started_at: float,
) -> list[Route]:
    """Discovery, health, ready, enroll, hooks and the admin allowlist."""
    discovery = discovery_document(settings).model_dump(mode="json")

    async def well_known(request: Request) -> Response:
        return JSONResponse(discovery)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "server_version": __version__})

    async def ready(request: Request) -> Response:
        report = await anyio.to_thread.run_sync(hub.readiness)
        return JSONResponse(report, status_code=503 if report["status"] == "not_ready" else 200)

    async def enroll(request: Request) -> Response:
        return await _bounded(_enroll, request)

    async def _enroll(request: Request) -> Response:
        try:
            payload = EnrollRequest.model_validate(await read_json(request, ENROLL_BODY_MAX_BYTES))
        except PydanticValidationError:
            return error(
                400, "invalid", 'body must be {"code": "<enrollment code>"} (code: 1..256 characters)'
            )
        except IvoaiError as exc:
            return _from_exc(exc)
        try:
            response = await anyio.to_thread.run_sync(enrollment.exchange, payload.code)
        except EnrollmentRejected as exc:
            return error(400, exc.code, exc.message)
        except IvoaiError as exc:
            return _from_exc(exc)
        return JSONResponse(response.model_dump(mode="json"))

    def authed(scope_needed: str, handler: Callable[[Request, Principal], Awaitable[Response]]) -> Handler:
        async def endpoint(request: Request) -> Response:
            header = request.headers.get("authorization", "")
            token = header[7:].strip() if header[:7].lower() == "bearer " else ""
            principal = verify_native(token) if token else None
            if principal is None:
                return JSONResponse(
                    {"error": "invalid_token", "message": "a valid client credential is required"},
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer realm="ivoai"'},
                )
            if scope_needed not in principal.scopes:
                return JSONResponse(
                    {"error": "insufficient_scope", "message": f"requires the {scope_needed} scope"},
                    status_code=403,
                    headers={
                        "WWW-Authenticate": f'Bearer realm="ivoai", error="insufficient_scope", '
                        f'scope="{scope_needed}"'
                    },
                )
            try:
                with anyio.fail_after(HTTP_HANDLER_TIMEOUT_SECONDS):
                    return await handler(request, principal)
            except IvoaiError as exc:
                return _from_exc(exc)
            except TimeoutError:
                return error(
                    504, "timeout", f"the request took longer than {HTTP_HANDLER_TIMEOUT_SECONDS:g} s"
                )

        return endpoint

    async def hook(request: Request, principal: Principal) -> Response:
        event = await read_json(request, HTTP_BODY_MAX_BYTES)
        memory = await anyio.to_thread.run_sync(hub.memory)
        result = await anyio.to_thread.run_sync(memory.hook_event, event)
        return JSONResponse(result.model_dump(mode="json"))

    async def hook_batch(request: Request, principal: Principal) -> Response:
        batch = await read_json(request, HTTP_BODY_MAX_BYTES)
        memory = await anyio.to_thread.run_sync(hub.memory)
        result = await anyio.to_thread.run_sync(memory.hook_batch, batch)
        return JSONResponse(result.model_dump(mode="json"))

    async def admin_status(request: Request, principal: Principal) -> Response:
        report = await anyio.to_thread.run_sync(hub.readiness)
        return JSONResponse(
            {
                "server_version": __version__,
                "protocol_version": PROTOCOL_VERSION,
                "status": report["status"],
                "uptime_seconds": round(time.monotonic() - started_at, 1),
            }
        )

    async def admin_doctor(request: Request, principal: Principal) -> Response:
        report = await anyio.to_thread.run_sync(hub.readiness)
        return JSONResponse(
            {
                "status": report["status"],
                "checks": report["checks"],
                "transport": {"tls": settings.tls, "trusted_proxies": len(settings.trusted_proxies)},
            }
        )

    async def admin_connectors(request: Request, principal: Principal) -> Response:
        try:
            context = await anyio.to_thread.run_sync(hub.context)
        except ServiceUnavailable as exc:
            return _from_exc(exc)
        connectors = await anyio.to_thread.run_sync(context.list_connectors)
        # Typed and path-free: a remote reader learns names and counts, never server paths.
        return JSONResponse(
            {
                "connectors": [
                    {
                        "name": c.name,
                        "type": c.type,
                        "state": c.state,
                        "documents": c.documents,
                        "bytes": c.bytes,
                    }
                    for c in connectors
                ]
            }
        )

    return [
        Route(DISCOVERY_PATH, well_known, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route("/v1/enroll", enroll, methods=["POST"]),
        Route("/v1/memory/hook", authed(SCOPE_MEMORY_WRITE, hook), methods=["POST"]),
        Route("/v1/memory/hook/batch", authed(SCOPE_MEMORY_WRITE, hook_batch), methods=["POST"]),
        Route("/v1/admin/status", authed(SCOPE_STATUS_READ, admin_status), methods=["GET"]),
        Route("/v1/admin/doctor", authed(SCOPE_DOCTOR_READ, admin_doctor), methods=["GET"]),
        Route("/v1/admin/connectors", authed(SCOPE_CONNECTOR_READ, admin_connectors), methods=["GET"]),
    ]
