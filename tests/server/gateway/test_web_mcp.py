"""Web MCP specifics: initialize instructions, skills/list and skills/get, periodic re-ingestion."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from ivoai.server.app import create_app
from ivoai.server.context.models import IngestReport
from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.skills.registry import load_skill
from tests.server.auth.oauth_client import INIT, full_flow
from tests.server.gateway.support import data_dir, inproc, make_app, make_hub

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _sse_json(text: str) -> dict[str, Any]:
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            message: dict[str, Any] = json.loads(line[5:])
            return message
    raise AssertionError(f"no SSE data in {text!r}")


async def _rpc(
    http: httpx2.AsyncClient, headers: dict[str, str], method: str, params: dict[str, Any], rid: int
) -> dict[str, Any]:
    response = await http.post(
        "/mcp", json={"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, headers=headers
    )
    assert response.status_code == 200, response.text
    return _sse_json(response.text)


async def test_initialize_states_the_research_order_and_skills_are_listed_and_fetched(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        _, tokens = await full_flow(app, http)
        headers = {**HEADERS, "Authorization": f"Bearer {tokens['access_token']}"}
        init = await http.post("/mcp", headers=headers, json=INIT)
        result = _sse_json(init.text)["result"]
        headers["mcp-session-id"] = init.headers["mcp-session-id"]
        headers["mcp-protocol-version"] = result["protocolVersion"]
        await http.post(
            "/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        listed = await _rpc(http, headers, "skills/list", {}, 2)
        got = await _rpc(http, headers, "skills/get", {"name": "ivoai-memory-context"}, 3)
        missing = await _rpc(http, headers, "skills/get", {"name": "nope"}, 4)
    instructions = result["instructions"]
    assert instructions.index("memory") < instructions.index("context") < instructions.index("web")
    # 2025-11-25 has no `capabilities.extensions` (the SDK advertises SEP-2133 extensions from
    # 2026-07-28 on), so the instructions point at skills/list and the skill resource as well.
    assert "skills/list" in instructions and "skill://ivoai-memory-context/SKILL.md" in instructions
    assert result["capabilities"]["resources"] is not None
    skill = load_skill("ivoai-memory-context")
    assert listed["result"]["skills"] == [
        {
            "name": "ivoai-memory-context",
            "description": skill.description,
            "uri": skill.uri,
            "digest": skill.digest,
            "mimeType": "text/markdown",
        }
    ]
    assert got["result"]["text"] == skill.text and got["result"]["digest"] == skill.digest
    assert "error" in missing


async def test_connectors_are_reingested_periodically_while_serving(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    source = tmp_path / "docs"
    source.mkdir()
    (source / "a.md").write_text("alpha document about deployment\n")
    hub = make_hub(data)
    hub.context().add_connector("docs", "filesystem", str(source))
    reports: list[IngestReport] = []
    done = anyio.Event()

    def seen(report: IngestReport) -> None:
        reports.append(report)
        done.set()

    # 1 s instead of the 300 s default (the CLI refuses < 10 s; the loop itself does not care).
    app = create_app(
        data, GatewaySettings(reingest_interval_seconds=1), hub=hub, reingest=True, on_reingest=seen
    )
    async with app.lifespan():
        with anyio.fail_after(60):
            await done.wait()
    assert reports[0].status == "ok"
    assert reports[0].connectors[0].added == 1


def test_a_non_loopback_listener_needs_a_public_url() -> None:
    from ivoai.common.errors import ValidationError

    with pytest.raises(ValidationError, match="needs --public-url"):
        GatewaySettings(
            listen_host="0.0.0.0", trusted_proxies=(), tls_cert=Path("c"), tls_key=Path("k")
        ).validate()
