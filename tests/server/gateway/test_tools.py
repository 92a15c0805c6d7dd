"""The tool boundary checks scopes itself, independent of the HTTP pre-check."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from ivoai.server.auth.principal import Principal
from ivoai.server.gateway.tools import PRINCIPAL_KEY, TOOL_SCOPES, require


def _ctx(principal: Principal | None) -> Any:
    """A stand-in for the SDK's tool Context: only the attribute chain `require` reads."""
    scope = {} if principal is None else {PRINCIPAL_KEY: principal}
    return cast(Any, SimpleNamespace(request_context=SimpleNamespace(request=SimpleNamespace(scope=scope))))


def test_a_tool_refuses_a_principal_without_its_scope() -> None:
    reader = Principal(kind="oauth", client_id="c", scopes=frozenset({"memory:read"}))
    assert require(_ctx(reader), "memory_query") is reader
    with pytest.raises(
        ToolError, match="insufficient_scope: memory_write_page requires the memory:write scope"
    ):
        require(_ctx(reader), "memory_write_page")


def test_a_tool_refuses_a_request_without_a_principal() -> None:
    with pytest.raises(ToolError, match="unauthenticated"):
        require(_ctx(None), "context_search")


def test_delete_needs_memory_delete_and_no_scope_implies_another() -> None:
    everything_else = Principal(
        kind="native", client_id="c", scopes=frozenset(set(TOOL_SCOPES.values()) - {"memory:delete"})
    )
    with pytest.raises(ToolError, match="memory:delete"):
        require(_ctx(everything_else), "memory_delete_page")


def test_every_read_tool_needs_a_read_scope() -> None:
    reads = {
        "context_search",
        "context_get_document",
        "context_recent",
        "context_health",
        "search",
        "fetch",
        "memory_query",
        "memory_recent",
        "memory_read_page",
        "memory_status",
    }
    assert {TOOL_SCOPES[t] for t in reads} == {"context:read", "memory:read"}
