"""The real gateway app driven in process with the MCP SDK client and plain HTTP."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from mcp_types import TextContent

from ivoai.common.protocol import DiscoveryDocument
from tests.server.gateway.support import data_dir, enroll, inproc, make_app, mcp_session

pytestmark = pytest.mark.anyio


async def test_discovery_returns_exactly_the_protocol_1_fields_with_no_store(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        response = await http.get("/.well-known/ivoai")
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert set(body) == {
        "protocol_version",
        "server_version",
        "public_base_url",
        "health_endpoint",
        "ready_endpoint",
        "enrollment_endpoint",
        "context_mcp_endpoint",
        "memory_mcp_endpoint",
        "memory_hooks_endpoint",
        "web_mcp_endpoint",
        "oauth_authorization_server_metadata",
        "features",
    }
    doc = DiscoveryDocument.model_validate(body)
    assert doc.protocol_version == 1 and doc.public_base_url == "http://127.0.0.1:7744"
    assert body["features"] == {
        "context": True,
        "memory": True,
        "memory_hooks": True,
        "web_mcp": True,
        "oauth_pkce": True,
        "remote_admin_read_only": True,
    }


async def test_health_is_ok_and_ready_reports_both_services(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        assert (await http.get("/health")).json()["status"] == "ok"
        ready = await http.get("/ready")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"


async def test_memory_down_means_ready_degraded_and_memory_tools_fail_cleanly_while_context_works(
    tmp_path: Path,
) -> None:
    app = make_app(data_dir(tmp_path), memory_fails=True)
    cred = enroll(app)
    async with inproc(app, headers={"Authorization": f"Bearer {cred}"}) as http:
        ready = (await http.get("/ready")).json()
        assert ready["status"] == "ready_degraded"
        assert ready["checks"]["memory"]["status"] == "unavailable"
        async with mcp_session(f"{app.settings.base_url}/v1/memory/mcp", http) as s:
            result = await s.call_tool("memory_query", {"text": "auth"})
        assert result.is_error
        assert isinstance(result.content[0], TextContent)
        assert "service_unavailable: memory service unavailable" in result.content[0].text
        async with mcp_session(f"{app.settings.base_url}/v1/mcp/context", http) as s:
            ok = await s.call_tool("context_health", {})
        assert not ok.is_error and ok.structured_content is not None
        assert ok.structured_content["status"] == "ok"


async def test_enrollment_over_http_returns_credential_once(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    code = app.enrollment.create_code().code
    async with inproc(app) as http:
        first = await http.post("/v1/enroll", json={"code": code})
        second = await http.post("/v1/enroll", json={"code": code})
        bogus = await http.post("/v1/enroll", json={"code": "nope"})
    assert first.status_code == 200
    body = first.json()
    assert set(body) == {"credential", "client_id", "scopes"}
    assert second.status_code == 400 and bogus.status_code == 400
    assert (
        second.json()
        == bogus.json()
        == {
            "error": "enrollment_rejected",
            "message": "enrollment code is invalid, expired, already used or revoked",
        }
    )


async def test_enroll_refuses_code_in_url_or_non_json_body(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    code = app.enrollment.create_code().code
    async with inproc(app) as http:
        in_url = await http.post(f"/v1/enroll?code={code}")
        form = await http.post("/v1/enroll", data={"code": code})
    assert in_url.status_code == 400 and form.status_code == 400
    assert form.json()["message"] == "Content-Type must be application/json"


async def test_native_context_route_lists_four_read_only_tools(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    cred = enroll(app)
    async with (
        inproc(app, headers={"Authorization": f"Bearer {cred}"}) as http,
        mcp_session(f"{app.settings.base_url}/v1/mcp/context", http) as s,
    ):
        tools = (await s.list_tools()).tools
        result = await s.call_tool("context_search", {"query": "anything", "limit": 3})
    assert sorted(t.name for t in tools) == [
        "context_get_document",
        "context_health",
        "context_recent",
        "context_search",
    ]
    assert all(t.annotations is not None and t.annotations.read_only_hint for t in tools)
    assert not result.is_error
    assert result.structured_content is not None and result.structured_content["results"] == []


async def test_memory_write_then_query_over_native_route(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    cred = enroll(app)
    async with (
        inproc(app, headers={"Authorization": f"Bearer {cred}"}) as http,
        mcp_session(f"{app.settings.base_url}/v1/memory/mcp", http) as s,
    ):
        written = await s.call_tool(
            "memory_write_page",
            {"path": "decisions/auth.md", "body": "We use OAuth with PKCE for the web."},
        )
        assert not written.is_error, written.content
        found = await s.call_tool("memory_query", {"text": "OAuth PKCE"})
        tools = {t.name: t for t in (await s.list_tools()).tools}
    assert found.structured_content is not None
    assert [h["path"] for h in found.structured_content["hits"]] == ["decisions/auth.md"]
    assert tools["memory_query"].annotations and tools["memory_query"].annotations.read_only_hint
    assert (
        tools["memory_delete_page"].annotations and tools["memory_delete_page"].annotations.destructive_hint
    )


async def test_missing_or_unknown_credential_gets_401(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        none = await http.post("/v1/mcp/context", json={})
        bad = await http.post("/v1/mcp/context", json={}, headers={"Authorization": "Bearer ivc_wrong"})
    assert none.status_code == 401 and bad.status_code == 401
    assert bad.headers["www-authenticate"].startswith("Bearer ")


async def test_tool_needing_a_missing_scope_gets_403_insufficient_scope(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    cred = enroll(app)  # default scopes: no memory:delete
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "memory_delete_page", "arguments": {"path": "a.md", "confirm": "a.md"}},
    }
    async with inproc(app, headers={"Authorization": f"Bearer {cred}"}) as http:
        response = await http.post(
            "/v1/memory/mcp", json=call, headers={"Accept": "application/json, text/event-stream"}
        )
    assert response.status_code == 403
    assert response.json()["error"] == "insufficient_scope"
    assert 'scope="memory:delete"' in response.headers["www-authenticate"]


async def test_revoked_client_is_refused_on_the_next_request(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    code = app.enrollment.create_code().code
    response = app.enrollment.exchange(code)
    async with inproc(app, headers={"Authorization": f"Bearer {response.credential}"}) as http:
        ok = await http.get("/v1/admin/status")
        app.enrollment.revoke_client(response.client_id)
        refused = await http.get("/v1/admin/status")
    assert ok.status_code == 200 and refused.status_code == 401


async def test_hook_intake_needs_memory_write_and_applies_events(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    writer = enroll(app)
    reader = enroll(app, scopes=["memory:read"])
    event = {"idempotency_key": "k1", "event": "session_start", "session_id": "s1", "agent": "codex"}
    async with inproc(app) as http:
        denied = await http.post("/v1/memory/hook", json=event, headers={"Authorization": f"Bearer {reader}"})
        applied = await http.post(
            "/v1/memory/hook", json=event, headers={"Authorization": f"Bearer {writer}"}
        )
        batch = await http.post(
            "/v1/memory/hook/batch", json={"events": [event]}, headers={"Authorization": f"Bearer {writer}"}
        )
    assert denied.status_code == 403
    assert applied.status_code == 200, applied.text
    assert applied.json()["status"] == "applied"
    assert batch.json()["duplicates"] == 1


async def test_admin_allowlist_is_typed_read_only_and_path_free(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    cred = enroll(app)
    async with inproc(app, headers={"Authorization": f"Bearer {cred}"}) as http:
        status = await http.get("/v1/admin/status")
        doctor = await http.get("/v1/admin/doctor")
        connectors = await http.get("/v1/admin/connectors")
        shell = await http.post("/v1/admin/status", json={"cmd": "id"})
    assert status.json()["protocol_version"] == 1
    assert doctor.json()["status"] == "ready"
    assert connectors.json() == {"connectors": []}
    assert shell.status_code == 405


async def test_bad_host_is_refused_and_foreign_origin_is_refused(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        host = await http.get("/health", headers={"Host": "evil.example.com"})
        origin = await http.post(
            "/v1/enroll", json={"code": "x"}, headers={"Origin": "https://evil.example.com"}
        )
        same = await http.post("/v1/enroll", json={"code": "x"}, headers={"Origin": "http://127.0.0.1:7744"})
    assert host.status_code == 421
    assert origin.status_code == 403
    assert same.status_code == 400  # reached the handler


async def test_oversized_body_gets_413(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        response = await http.post(
            "/v1/enroll", content=b"x" * (4 * 1024 * 1024 + 1), headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 413


async def test_web_mcp_advertises_instructions_and_skill_resource_with_digest(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    token = "ivo_at_unused"
    del token
    async with inproc(app) as http:
        unauth = await http.post("/mcp", json={})
    assert unauth.status_code == 401
    assert unauth.headers["www-authenticate"] == (
        'Bearer realm="ivoai", resource_metadata="http://127.0.0.1:7744/.well-known/oauth-protected-resource/mcp"'
    )


def test_httpx2_is_the_sdk_client_transport() -> None:
    assert httpx2.ASGITransport is not None


async def test_context_down_means_not_ready_while_discovery_and_enrollment_keep_working(
    tmp_path: Path,
) -> None:
    from ivoai.server.app import create_app
    from ivoai.server.context.service import ContextService
    from ivoai.server.gateway.services import ServiceHub
    from ivoai.server.gateway.settings import GatewaySettings

    data = data_dir(tmp_path)

    def broken() -> ContextService:
        raise OSError("index directory unreadable (test)")

    app = create_app(data, GatewaySettings(), hub=ServiceHub(data, context_opener=broken))
    code = app.enrollment.create_code().code
    async with inproc(app) as http:
        ready = await http.get("/ready")
        discovery = await http.get("/.well-known/ivoai")
        enrolled = await http.post("/v1/enroll", json={"code": code})
    assert ready.status_code == 503 and ready.json()["status"] == "not_ready"
    assert discovery.status_code == 200 and enrolled.status_code == 200
