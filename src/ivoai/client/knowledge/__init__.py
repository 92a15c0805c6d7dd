"""Server profiles, pools, the per-session knowledge router, circuit breakers.

Light on purpose: the launcher imports this package on its fast path; the router's HTTP and MCP
stack is imported only when a router starts.
"""

from ivoai.client.knowledge.profiles import KnowledgeSource, ServerPool, ServerProfile
from ivoai.client.knowledge.router import (
    RouterConfig,
    RouterHandle,
    enabled_sources,
    session_router,
    start_session_router,
)

__all__ = [
    "KnowledgeSource",
    "RouterConfig",
    "RouterHandle",
    "ServerPool",
    "ServerProfile",
    "enabled_sources",
    "session_router",
    "start_session_router",
]
