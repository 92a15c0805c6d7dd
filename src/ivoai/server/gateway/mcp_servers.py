"""The three MCP servers the gateway mounts, each with its own Streamable HTTP session manager.

- native context (`/v1/mcp/context`) and native memory (`/v1/memory/mcp`): stateless, plain JSON
  responses: every POST is self-contained, which suits the client's knowledge router (it forwards
  single JSON-RPC calls and fans them out) and costs no per-session state;
- Web MCP (`/mcp`): stateful Streamable HTTP with SSE (what ChatGPT, Claude and the conformance
  suite expect), aggregating the context tools, the Web memory tools, ChatGPT `search`/`fetch`
  and the skill (resource plus `skills/list` / `skills/get`). Served by several worker processes
  (`server start --workers N`, N > 1) it is stateless instead (SSE responses kept): an MCP session
  would live in the one process that opened it, and a client's next request may reach another.

DNS-rebinding protection is done once, for every route, by `guard.GatewayGuard`; the SDK's own
check is therefore off here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, RequestParams

from ivoai import __version__
from ivoai.common.errors import NotFoundError
from ivoai.common.limits import HTTP_BODY_MAX_BYTES
from ivoai.server.gateway.services import ServiceHub
from ivoai.server.gateway.tools import (
    RESEARCH_ORDER,
    UNTRUSTED,
    IvoaiMCPServer,
    add_chatgpt_tools,
    add_context_tools,
    add_memory_tools,
)
from ivoai.server.skills.registry import SKILL_MIME, all_skills, load_skill

WEB_INSTRUCTIONS = (
    f"ivoai: the team's shared memory and indexed code/documents. {RESEARCH_ORDER} {UNTRUSTED} "
    "The ivoai-memory-context skill (skills/list, or resource skill://ivoai-memory-context/SKILL.md) "
    "describes the same workflow."
)
SKILLS_EXTENSION = "io.ivoai/skills"
NO_REBINDING_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


class SkillsGetParams(RequestParams):
    name: str


class SkillsListParams(RequestParams):
    pass


class SkillsExtension(Extension):
    """`skills/list` and `skills/get`: the bounded skills extension advertised at initialize."""

    identifier = SKILLS_EXTENSION

    def settings(self) -> dict[str, Any]:
        return {"methods": ["skills/list", "skills/get"], "uriScheme": "skill"}

    def methods(self) -> list[MethodBinding]:
        async def list_skills(ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
            return {
                "skills": [
                    {
                        "name": s.name,
                        "description": s.description,
                        "uri": s.uri,
                        "digest": s.digest,
                        "mimeType": SKILL_MIME,
                    }
                    for s in all_skills()
                ]
            }

        async def get_skill(ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
            try:
                skill = load_skill(params.name)
            except NotFoundError as exc:
                raise MCPError(code=INVALID_PARAMS, message=exc.message) from None
            return {
                "name": skill.name,
                "uri": skill.uri,
                "digest": skill.digest,
                "mimeType": SKILL_MIME,
                "text": skill.text,
            }

        return [
            MethodBinding("skills/list", SkillsListParams, list_skills),
            MethodBinding("skills/get", SkillsGetParams, get_skill),
        ]


def _reader(text: str) -> Any:
    def read() -> str:
        return text

    return read


@dataclass
class McpMount:
    """One MCP server, its session manager and the ASGI endpoint that serves it."""

    server: MCPServer[Any]
    manager: StreamableHTTPSessionManager
    endpoint: StreamableHTTPASGIApp


def _mount(server: MCPServer[Any], *, stateless: bool, json_response: bool) -> McpMount:
    server.streamable_http_app(
        streamable_http_path="/",
        stateless_http=stateless,
        json_response=json_response,
        max_request_body_size=HTTP_BODY_MAX_BYTES,
        transport_security=NO_REBINDING_CHECK,
    )
    manager = server.session_manager
    return McpMount(server=server, manager=manager, endpoint=StreamableHTTPASGIApp(manager))


def native_context_mount(hub: ServiceHub) -> McpMount:
    """`/v1/mcp/context`: the four context tools."""
    server: MCPServer[Any] = IvoaiMCPServer(
        "ivoai-context",
        version=__version__,
        instructions=f"{RESEARCH_ORDER} {UNTRUSTED}",
        log_level="WARNING",
    )
    add_context_tools(server, hub)
    return _mount(server, stateless=True, json_response=True)


def native_memory_mount(hub: ServiceHub) -> McpMount:
    """`/v1/memory/mcp`: the memory tools."""
    server: MCPServer[Any] = IvoaiMCPServer(
        "ivoai-memory", version=__version__, instructions=RESEARCH_ORDER, log_level="WARNING"
    )
    add_memory_tools(server, hub)
    return _mount(server, stateless=True, json_response=True)


def web_mount(hub: ServiceHub, *, stateless: bool = False) -> McpMount:
    """`/mcp`: one connector URL for ChatGPT and Claude on the web; `stateless` when several worker
    processes serve it (no `Mcp-Session-Id`: every request stands alone, whichever worker takes it)."""
    server: MCPServer[Any] = IvoaiMCPServer(
        "ivoai",
        version=__version__,
        instructions=WEB_INSTRUCTIONS,
        extensions=[SkillsExtension()],
        log_level="WARNING",
    )
    add_context_tools(server, hub)
    add_memory_tools(server, hub)
    add_chatgpt_tools(server, hub)
    for skill in all_skills():
        server.resource(
            skill.uri,
            name=skill.name,
            description=skill.description,
            mime_type=SKILL_MIME,
            meta={"io.ivoai/digest": skill.digest},
        )(_reader(skill.text))
    return _mount(server, stateless=stateless, json_response=False)
