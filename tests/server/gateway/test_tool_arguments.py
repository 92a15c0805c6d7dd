"""Tool arguments over a real socket with the MCP SDK client: `query` on every search tool, and
arguments that fail a tool's schema answered with one line naming the field, on the native routes
and on the Web `/mcp` facade (OAuth token from the real authorization flow)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.shared._httpx_utils import create_mcp_http_client

from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.runtime.runner import RunningServer, running
from tests.server.auth.oauth_client import full_flow
from tests.server.gateway.support import data_dir, enroll, make_hub, mcp_session

pytestmark = pytest.mark.anyio

PROBE_VALUE = "zz-caller-value-zz"  # must never be echoed back in an error


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def _assert_one_line_naming(result: Any, tool: str, field: str) -> str:
    assert result.is_error
    text = _text(result)
    assert text.startswith(f"invalid_arguments: {tool}: {field}: "), text
    assert "\n" not in text
    assert "pydantic" not in text and "http" not in text and "validation error" not in text
    assert PROBE_VALUE not in text
    return text


@asynccontextmanager
async def _gateway(tmp_path: Path) -> AsyncIterator[RunningServer]:
    data = data_dir(tmp_path)
    with running(data, GatewaySettings(listen_port=0), hub=make_hub(data)) as srv:
        yield srv


@asynccontextmanager
async def _native(srv: RunningServer, path: str) -> AsyncIterator[ClientSession]:
    cred = enroll(srv.app)
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {cred}"}) as http,
        mcp_session(f"{srv.url}{path}", http) as session,
    ):
        yield session


async def test_memory_query_takes_query_like_context_search_and_keeps_text(tmp_path: Path) -> None:
    async with _gateway(tmp_path) as srv, _native(srv, "/v1/memory/mcp") as memory:
        written = await memory.call_tool(
            "memory_write_page", {"path": "decisions/vpn.md", "body": "# VPN\n\nUse the wireguard profile."}
        )
        assert not written.is_error, _text(written)
        by_query = await memory.call_tool("memory_query", {"query": "wireguard profile"})
        by_text = await memory.call_tool("memory_query", {"text": "wireguard profile"})
        both = await memory.call_tool("memory_query", {"query": "vpn", "text": "other"})
        neither = await memory.call_tool("memory_query", {"limit": 3})
        listed = {t.name: t for t in (await memory.list_tools()).tools}
    assert not by_query.is_error and not by_text.is_error
    assert by_query.structured_content is not None and by_text.structured_content is not None
    assert [h["path"] for h in by_query.structured_content["hits"]] == ["decisions/vpn.md"]
    assert by_query.structured_content["hits"] == by_text.structured_content["hits"]
    assert both.is_error and "not both" in _text(both)
    assert neither.is_error and _text(neither).startswith("invalid_arguments: memory_query: query: required")
    assert {"query", "text"} <= set(listed["memory_query"].input_schema["properties"])


async def test_schema_violations_on_native_routes_are_one_line_errors_naming_the_field(
    tmp_path: Path,
) -> None:
    async with _gateway(tmp_path) as srv:
        async with _native(srv, "/v1/mcp/context") as context:
            wrong_name = await context.call_tool("context_search", {"text": PROBE_VALUE})
            bad_limit = await context.call_tool("context_search", {"query": "x", "limit": PROBE_VALUE})
            too_big = await context.call_tool("context_search", {"query": "x", "limit": 10_000})
        async with _native(srv, "/v1/memory/mcp") as memory:
            bad_type = await memory.call_tool("memory_query", {"query": "x", "limit": 0})
            missing = await memory.call_tool("memory_write_page", {"body": PROBE_VALUE})
            absent = await memory.call_tool("memory_read_page", {"path": "nope.md"})
    text = _assert_one_line_naming(wrong_name, "context_search", "query")
    assert "required" in text and "(arguments: budget_bytes, connector, limit, path_prefix, query)" in text
    assert "integer" in _assert_one_line_naming(bad_limit, "context_search", "limit")
    assert "less than or equal to 100" in _assert_one_line_naming(too_big, "context_search", "limit")
    assert "greater than or equal to 1" in _assert_one_line_naming(bad_type, "memory_query", "limit")
    _assert_one_line_naming(missing, "memory_write_page", "path")
    # A tool's own error reads `<code>: <message>`, without the SDK's "Error executing tool" prefix.
    assert absent.is_error and _text(absent).startswith("memory_not_found: "), _text(absent)


async def test_the_web_mcp_facade_gives_the_same_arguments_and_errors(tmp_path: Path) -> None:
    async with _gateway(tmp_path) as srv, httpx2.AsyncClient(base_url=srv.url) as http:
        _, tokens = await full_flow(srv.app, http)
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {tokens['access_token']}"}) as web,
            mcp_session(f"{srv.url}/mcp", web) as session,
        ):
            recalled = await session.call_tool("memory_query", {"query": "anything"})
            wrong_name = await session.call_tool("context_search", {"q": PROBE_VALUE})
            bad_fetch = await session.call_tool("fetch", {"id": 7})
    assert not recalled.is_error, _text(recalled)
    _assert_one_line_naming(wrong_name, "context_search", "query")
    _assert_one_line_naming(bad_fetch, "fetch", "id")
