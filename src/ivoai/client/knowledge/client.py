"""Use a session router from the CLI: start it, talk to it over MCP like an agent would, stop it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from ivoai.client.knowledge.router import STATUS_TOOL, RouterConfig, RouterHandle, start_session_router
from ivoai.client.knowledge.upstream import open_session
from ivoai.common.paths import XdgPaths

SEARCH_TOOLS = ("memory_query", "context_search")  # memory first, then context (the research order)
STATUS_TOOLS = ("memory_status", "context_health")
_QUERY_ARGS = ("query", "text", "q")


def _args_for(tool: Any, query: str | None, limit: int | None) -> dict[str, Any]:
    props = (tool.input_schema or {}).get("properties") or {}
    args: dict[str, Any] = {}
    if query is not None:
        key = next((k for k in _QUERY_ARGS if k in props), "query")
        args[key] = query
    if limit is not None and "limit" in props:
        args["limit"] = limit
    return args


async def _call_all(
    handle: RouterHandle, tools: Sequence[str], query: str | None, limit: int | None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with open_session(handle.url, handle.token) as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        status = await session.call_tool(STATUS_TOOL, {})
        out[STATUS_TOOL] = status.structured_content
        for name in tools:
            if name not in listed:
                continue
            result = await session.call_tool(name, _args_for(listed[name], query, limit))
            out[name] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return out


def run_tools(
    tools: Sequence[str],
    *,
    query: str | None = None,
    limit: int | None = None,
    selectors: Sequence[str] = (),
    paths: XdgPaths | None = None,
    config: RouterConfig | None = None,
) -> dict[str, Any]:
    """Start a router over the selected sources, call `tools` through it, stop it; return the results."""
    with start_session_router(selectors, paths=paths, config=config) as handle:
        result: dict[str, Any] = {}

        async def main() -> None:
            result.update(await _call_all(handle, tools, query, limit))

        anyio.run(main)
        return result


def search(
    query: str,
    *,
    limit: int = 10,
    selectors: Sequence[str] = (),
    paths: XdgPaths | None = None,
    config: RouterConfig | None = None,
) -> dict[str, Any]:
    """Federated memory and context search through a router."""
    return run_tools(SEARCH_TOOLS, query=query, limit=limit, selectors=selectors, paths=paths, config=config)


def status(
    *, selectors: Sequence[str] = (), paths: XdgPaths | None = None, config: RouterConfig | None = None
) -> dict[str, Any]:
    """Live health of every selected source through a router."""
    return run_tools(STATUS_TOOLS, selectors=selectors, paths=paths, config=config)
