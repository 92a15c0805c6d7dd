"""Use a session router from the CLI: start it, talk to it over MCP like an agent would, stop it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def for_output(results: Mapping[str, Any]) -> dict[str, Any]:
    """The results of `run_tools` as one document for `--json`: each tool result once.

    A tool result carries its answer twice, as `structuredContent` and as a text block holding the
    same object as JSON (for agents that read only text). Scripts want it once, so the text copy is
    dropped wherever the structured form exists. `ok` is false when no search tool was answered.
    """
    out: dict[str, Any] = {"ok": answered(results)}
    for name, value in results.items():
        if isinstance(value, Mapping) and "structuredContent" in value and "content" in value:
            value = {k: v for k, v in value.items() if k != "content"}
        out[name] = value
    return out


def answered(results: Mapping[str, Any]) -> bool:
    """True when at least one of the called tools (not the router's own status) got an answer."""
    return any(
        isinstance(value, Mapping) and not value.get("isError")
        for name, value in results.items()
        if name != STATUS_TOOL
    )


def failures(result: Mapping[str, Any]) -> list[str]:
    """`source: cause` for every source that did not answer one tool call (merged or single-source)."""
    structured = result.get("structuredContent")
    structured = structured if isinstance(structured, Mapping) else {}
    sources = structured.get("sources")
    if isinstance(sources, list):
        out = []
        for s in sources:
            if not isinstance(s, Mapping) or s.get("status") in ("ok", "not_found"):
                continue
            source, cause = str(s.get("source")), str(s.get("error") or s.get("status"))
            # A lone server's errors already start with its alias, which is then the source ID too.
            out.append(cause if cause.startswith(source + ": ") else f"{source}: {cause}")
        return out
    if not result.get("isError"):
        return []
    only, why = structured.get("knowledge_source"), structured.get("cause")
    if isinstance(only, str) and isinstance(why, str):  # the router's "did not answer" for one source
        return [why if why.startswith(only + ": ") else f"{only}: {why}"]
    if isinstance(structured.get("error"), str):
        return [str(structured["error"])]
    text = " ".join(
        str(c.get("text", "")) for c in result.get("content") or [] if isinstance(c, Mapping)
    ).strip()
    meta = result.get("_meta")
    origin = (meta.get("ivoai/knowledge_source") or {}).get("source") if isinstance(meta, Mapping) else None
    return [f"{origin or 'source'}: {text or 'the tool reported an error'}"]
