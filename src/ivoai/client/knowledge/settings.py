"""Router settings and the fixed routing vocabulary (light: imported on the launcher's path)."""

from __future__ import annotations

from dataclasses import dataclass

from ivoai.common.limits import (
    BREAKER_FAILURE_THRESHOLD,
    BREAKER_OPEN_SECONDS,
    ROUTER_REQUEST_MAX_BYTES,
    ROUTER_SOURCE_DEADLINE_SECONDS,
    ROUTER_UPSTREAM_RESPONSE_MAX_BYTES,
)

ROUTER_HOST = "127.0.0.1"
ROUTER_PATH = "/mcp"
ROUTER_START_TIMEOUT_SECONDS = 10.0  # bind + ASGI lifespan; far above what a healthy start takes
ROUTER_STOP_TIMEOUT_SECONDS = 5.0
SOURCE_ARG = "knowledge_source"
STATUS_TOOL = "knowledge_status"

# The protocol-1 tool names, in the order the router lists them when no upstream answers.
CONTEXT_TOOLS: tuple[str, ...] = (
    "context_search",
    "context_get_document",
    "context_recent",
    "context_health",
)
MEMORY_READ_TOOLS: tuple[str, ...] = ("memory_query", "memory_recent", "memory_read_page", "memory_status")
MEMORY_WRITE_TOOLS: tuple[str, ...] = ("memory_write_page", "memory_feedback", "memory_delete_page")
# Tools the router knows to be reads (fan out, fail over). Everything else is treated as a write.
READ_TOOLS: frozenset[str] = frozenset(CONTEXT_TOOLS + MEMORY_READ_TOOLS)
WRITE_TOOLS: frozenset[str] = frozenset(MEMORY_WRITE_TOOLS)


@dataclass(frozen=True)
class RouterConfig:
    """Tunable limits; the defaults are the documented ones."""

    source_deadline_seconds: float = ROUTER_SOURCE_DEADLINE_SECONDS
    breaker_threshold: int = BREAKER_FAILURE_THRESHOLD
    breaker_open_seconds: float = BREAKER_OPEN_SECONDS
    max_request_bytes: int = ROUTER_REQUEST_MAX_BYTES
    max_response_bytes: int = ROUTER_UPSTREAM_RESPONSE_MAX_BYTES
