"""The gateway's one error model: status from the error class, one JSON body, one bearer gate.

The real gateway app in process for the routes, and a bare Starlette app with the gateway's
exception handlers and bearer gate where a test needs an error no route raises on demand.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ivoai.common.errors import IvoaiError, UsageError
from ivoai.server.auth.enrollment import EnrollmentRejected
from ivoai.server.auth.principal import Principal
from ivoai.server.gateway.bearer import authenticated, principal_of
from ivoai.server.gateway.errors import EXCEPTION_HANDLERS, INTERNAL_MESSAGE, HandlerTimeout
from ivoai.server.gateway.services import ServiceUnavailable
from ivoai.server.memory.errors import (
    MemoryBusyError,
    MemoryClosedError,
    MemoryConflictError,
    MemoryNotFoundError,
    MemorySchemaError,
    MemoryStoreError,
    MemoryTooLargeError,
    MemoryValidationError,
)
from tests.server.gateway.support import data_dir, enroll, inproc, make_app

pytestmark = pytest.mark.anyio

BASE = "http://testserver"


@asynccontextmanager
async def bare(*routes: Route) -> AsyncIterator[httpx2.AsyncClient]:
    """A Starlette app with the gateway's exception handlers (no guard), over httpx2 in process."""
    app = Starlette(routes=list(routes), exception_handlers=EXCEPTION_HANDLERS)
    transport = httpx2.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx2.AsyncClient(transport=transport, base_url=BASE) as client:
        yield client


def raising(exc: Exception) -> Route:
    async def endpoint(request: Request) -> Response:
        raise exc

    return Route("/boom", endpoint)


@pytest.mark.parametrize(
    ("exc", "status", "retry_after"),
    [
        (MemoryValidationError("path: required"), 400, None),
        (UsageError("bad arguments"), 400, None),
        (EnrollmentRejected("enrollment code is invalid"), 400, None),
        (MemoryTooLargeError("body is 2000000 bytes; the limit is 1048576 bytes"), 413, None),
        (MemoryNotFoundError("decisions/x.md does not exist"), 404, None),
        (MemoryConflictError("expected version 3, the page is at 4"), 409, None),
        (MemoryBusyError("memory database stayed locked for 10s; retry"), 503, "1"),
        (MemoryClosedError("the memory service is closed"), 503, None),
        (ServiceUnavailable("memory service unavailable: OSError: disk"), 503, "30"),
        (HandlerTimeout("the request took longer than 120 s"), 504, None),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else None,
)
async def test_each_error_class_answers_its_own_status_in_the_one_body_shape(
    exc: IvoaiError, status: int, retry_after: str | None
) -> None:
    async with bare(raising(exc)) as http:
        response = await http.get("/boom")
    assert response.status_code == status
    assert response.json() == {"error": exc.code, "message": exc.message}
    assert response.headers.get("retry-after") == retry_after


@pytest.mark.parametrize(
    "exc",
    [
        MemoryStoreError(
            "memory database error: file /var/lib/ivoai/memory/memory.sqlite3 is not a database"
        ),
        MemorySchemaError("memory database at /var/lib/ivoai/memory has schema 9; this ivoai knows 4"),
        IvoaiError("unclassified failure at /var/lib/ivoai/x"),
    ],
    ids=["store", "schema", "base"],
)
async def test_a_server_side_failure_is_a_500_that_keeps_its_code_and_hides_its_message(
    exc: IvoaiError, caplog: pytest.LogCaptureFixture
) -> None:
    async with bare(raising(exc)) as http:
        response = await http.get("/boom")
    assert response.status_code == 500
    assert response.json() == {"error": exc.code, "message": INTERNAL_MESSAGE}
    assert "/var/lib" not in response.text
    assert exc.message in caplog.text  # the operator still sees it


async def test_an_unexpected_exception_is_a_json_500_without_details() -> None:
    async with bare(raising(RuntimeError("secret at /etc/ivoai/x"))) as http:
        response = await http.get("/boom")
    assert response.status_code == 500
    assert response.json() == {"error": "internal_error", "message": INTERNAL_MESSAGE}


async def test_routing_errors_are_json_in_the_same_shape_with_their_headers(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        missing = await http.get("/v1/no-such-route")
        wrong_method = await http.delete("/v1/enroll")
    assert missing.status_code == 404 and missing.json() == {"error": "not_found", "message": "Not Found"}
    assert wrong_method.status_code == 405
    assert wrong_method.json() == {"error": "method_not_allowed", "message": "Method Not Allowed"}
    assert wrong_method.headers["allow"] == "POST"


async def test_an_oversized_hook_event_is_413_memory_too_large(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    writer = enroll(app)
    event = {"idempotency_key": "k1", "event": "stop", "session_id": "s1", "message": "x" * (70 * 1024)}
    async with inproc(app, headers={"Authorization": f"Bearer {writer}"}) as http:
        response = await http.post("/v1/memory/hook", json=event)
    assert response.status_code == 413, response.text
    assert response.json()["error"] == "memory_too_large"


async def test_a_hook_to_a_closed_memory_service_is_503_so_the_flusher_keeps_the_events(
    tmp_path: Path,
) -> None:
    app = make_app(data_dir(tmp_path))
    writer = enroll(app)
    event = {"idempotency_key": "k1", "event": "session_start", "session_id": "s1", "agent": "codex"}
    async with inproc(app, headers={"Authorization": f"Bearer {writer}"}) as http:
        app.hub.memory().close()  # what a request meets while the gateway shuts down
        response = await http.post("/v1/memory/hook", json=event)
    assert response.status_code == 503
    assert response.json()["error"] == "memory_closed"


async def test_bearer_refusals_have_the_same_body_on_v1_and_mcp_routes(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    reader = enroll(app, scopes=["memory:read"])
    async with inproc(app) as http:
        v1 = await http.get("/v1/admin/status")
        mcp = await http.post("/v1/mcp/context", json={})
        wrong = await http.get("/v1/admin/status", headers={"Authorization": "Bearer ivc_wrong"})
        scope = await http.post("/v1/memory/hook", json={}, headers={"Authorization": f"bearer {reader}"})
    for refused in (v1, mcp, wrong):
        assert refused.status_code == 401
        body = refused.json()
        assert body["error"] == "invalid_token" and body["message"] == body["error_description"]
    assert v1.headers["www-authenticate"] == 'Bearer realm="ivoai"'
    assert wrong.headers["www-authenticate"] == 'Bearer realm="ivoai", error="invalid_token"'
    assert scope.status_code == 403 and scope.json()["error"] == "insufficient_scope"
    assert 'scope="memory:write"' in scope.headers["www-authenticate"]


async def test_the_gate_takes_any_credential_check_so_other_routes_reuse_it() -> None:
    def local_check(token: str) -> Principal | None:  # e.g. a loopback admin route's own credential
        return (
            Principal(kind="native", client_id="local", scopes=frozenset({"admin:write"}))
            if token == "t"
            else None
        )

    async def whoami(request: Request) -> Response:
        return JSONResponse({"client": principal_of(request).client_id})

    route = Route("/admin", authenticated(whoami, local_check, "admin:write"), methods=["POST"])
    async with bare(route) as http:
        ok = await http.post("/admin", headers={"Authorization": "Bearer t"})
        refused = await http.post("/admin", headers={"Authorization": "Basic dDp0"})
    assert ok.status_code == 200 and ok.json() == {"client": "local"}
    assert refused.status_code == 401 and json.loads(refused.text)["error"] == "invalid_token"


async def test_guard_refusals_and_the_body_bound_answer_in_the_same_shape(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    big = b"x" * (4 * 1024 * 1024 + 1)

    async def streamed() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b"y" * (1024 * 1024)  # no Content-Length: counted as it arrives

    async with inproc(app) as http:
        host = await http.get("/health", headers={"Host": "evil.example.com"})
        declared = await http.post(
            "/v1/mcp/context", content=big, headers={"Content-Type": "application/json"}
        )
        counted = await http.post(
            "/v1/enroll", content=streamed(), headers={"Content-Type": "application/json"}
        )
    assert host.status_code == 421
    assert host.json() == {
        "error": "invalid_host",
        "message": "Host is not this server",
        "error_description": "Host is not this server",
    }
    for refused in (declared, counted):
        assert refused.status_code == 413
        assert refused.json() == {"error": "too_large", "message": "request body exceeds 4194304 bytes"}
