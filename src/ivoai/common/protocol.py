"""Protocol version 1, shared by client and server: the discovery document and scopes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

PROTOCOL_VERSION = 1
DISCOVERY_PATH = "/.well-known/ivoai"

SCOPE_CONTEXT_READ = "context:read"
SCOPE_MEMORY_READ = "memory:read"
SCOPE_MEMORY_WRITE = "memory:write"
SCOPE_MEMORY_DELETE = "memory:delete"
SCOPE_STATUS_READ = "status:read"
SCOPE_DOCTOR_READ = "doctor:read"
SCOPE_CONNECTOR_READ = "connector:read"

ALL_SCOPES = (
    SCOPE_CONTEXT_READ,
    SCOPE_MEMORY_READ,
    SCOPE_MEMORY_WRITE,
    SCOPE_MEMORY_DELETE,
    SCOPE_STATUS_READ,
    SCOPE_DOCTOR_READ,
    SCOPE_CONNECTOR_READ,
)
# Enrollment grants these; administrative mutation (and memory:delete) is never implied.
DEFAULT_CLIENT_SCOPES = (
    SCOPE_CONTEXT_READ,
    SCOPE_MEMORY_READ,
    SCOPE_MEMORY_WRITE,
    SCOPE_STATUS_READ,
    SCOPE_DOCTOR_READ,
    SCOPE_CONNECTOR_READ,
)


class DiscoveryFeatures(BaseModel):
    model_config = ConfigDict(extra="allow")

    context: bool = True
    memory: bool = True
    memory_hooks: bool = True
    web_mcp: bool = True
    oauth_pkce: bool = True
    remote_admin_read_only: bool = True


class DiscoveryDocument(BaseModel):
    """`GET /.well-known/ivoai`: exactly the seed's protocol-1 fields (additive changes only)."""

    model_config = ConfigDict(extra="allow")

    protocol_version: int = Field(ge=1)
    server_version: str = Field(max_length=64)
    public_base_url: str = Field(max_length=2048)
    health_endpoint: str = "/health"
    ready_endpoint: str = "/ready"
    enrollment_endpoint: str = "/v1/enroll"
    context_mcp_endpoint: str = "/v1/mcp/context"
    memory_mcp_endpoint: str = "/v1/memory/mcp"
    memory_hooks_endpoint: str = "/v1/memory"
    web_mcp_endpoint: str = "/mcp"
    oauth_authorization_server_metadata: str = "/.well-known/oauth-authorization-server"
    features: DiscoveryFeatures = Field(default_factory=DiscoveryFeatures)


class EnrollRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(min_length=1, max_length=256)


class EnrollResponse(BaseModel):
    credential: str
    client_id: str
    scopes: list[str]
