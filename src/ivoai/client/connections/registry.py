"""The connection registry: enrolled ivoai servers, user-added MCP servers and official-login notes.

One JSON file, `$XDG_CONFIG_HOME/ivoai/connections.json` (0600 in the 0700 config directory), holds
no secret: credentials live in the secrets store keyed by each entry's opaque ID. Every mutation
takes an exclusive lock (`connections.lock`) and replaces the file atomically, so two ivoai
processes never lose each other's change and a crash never leaves a torn file.

Every MCP endpoint a session may use is modelled uniformly by `McpEntry` (stable ID, transport, URL
or argv, scopes, ownership, enabled): an ivoai server yields one entry per service (context,
memory); a user-added HTTP MCP server yields one. Agent-specific renderers read only this view.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from ivoai.client.connections.files import REGISTRY_FILE, REGISTRY_LOCK
from ivoai.client.knowledge.profiles import PRIORITY_DEFAULT, ServerProfile
from ivoai.common.errors import ConflictError, NotFoundError, ValidationError
from ivoai.common.fsio import atomic_write, file_lock, read_private_file_or_none
from ivoai.common.jsonio import dumps_bytes
from ivoai.common.limits import JSON_STATE_MAX_BYTES
from ivoai.common.paths import XdgPaths

REGISTRY_SCHEMA_VERSION = 1

Ownership = Literal["ivoai", "user"]


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class _ServerModel(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(pattern=r"^srv_[0-9a-f]{8,64}$")
    alias: str
    base_url: str
    purpose: str
    redundancy_group: str | None = None
    priority: int = PRIORITY_DEFAULT
    enabled: bool = True
    client_id: str = ""
    scopes: list[str] = Field(default_factory=list)
    protocol_version: int = 1
    server_version: str = ""
    endpoints: dict[str, str] = Field(default_factory=dict)
    features: dict[str, bool] = Field(default_factory=dict)
    enrolled_at: str = ""
    warnings: list[str] = Field(default_factory=list)


class _McpModel(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(pattern=r"^mcp_[0-9a-f]{8,64}$")
    name: str
    url: str
    transport: Literal["streamable-http"] = "streamable-http"
    auth: Literal["bearer", "none"] = "none"
    enabled: bool = True
    created_at: str = ""


class _OfficialModel(BaseModel):
    model_config = ConfigDict(extra="allow")

    connected_at: str = ""
    last_status: str = ""


class _RegistryModel(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_version: int = REGISTRY_SCHEMA_VERSION
    servers: list[_ServerModel] = Field(default_factory=list)
    mcp: list[_McpModel] = Field(default_factory=list)
    official: dict[str, _OfficialModel] = Field(default_factory=dict)


@dataclass(frozen=True)
class UserMcpServer:
    """A user-added HTTP MCP server; its optional bearer token is in the secrets store under `id`."""

    id: str
    name: str
    url: str
    auth: Literal["bearer", "none"] = "none"
    enabled: bool = True
    created_at: str = ""


@dataclass(frozen=True)
class OfficialLogin:
    """ivoai's own note that an official client was connected (never the vendor's credential)."""

    connected_at: str
    last_status: str


@dataclass(frozen=True)
class McpEntry:
    """One MCP endpoint, uniformly: what agent renderers consume."""

    id: str
    name: str
    transport: str
    url: str | None
    argv: tuple[str, ...]
    scopes: tuple[str, ...]
    ownership: Ownership
    enabled: bool
    secret_id: str | None
    kind: str


@dataclass
class RegistryState:
    """The registry's content, mutable inside `ConnectionRegistry.update()`."""

    servers: list[ServerProfile] = field(default_factory=list)
    mcp: list[UserMcpServer] = field(default_factory=list)
    official: dict[str, OfficialLogin] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)

    def server(self, alias: str) -> ServerProfile:
        """The profile named `alias`.

        Raises:
            NotFoundError: no server has that alias.
        """
        for profile in self.servers:
            if profile.alias == alias:
                return profile
        known = ", ".join(sorted(p.alias for p in self.servers)) or "none"
        raise NotFoundError(f"no enrolled server named {alias!r} (enrolled: {known})")

    def replace_server(self, profile: ServerProfile) -> None:
        self.servers = [profile if p.id == profile.id else p for p in self.servers]

    def user_mcp(self, name: str) -> UserMcpServer:
        for entry in self.mcp:
            if entry.name == name:
                return entry
        known = ", ".join(sorted(e.name for e in self.mcp)) or "none"
        raise NotFoundError(f"no MCP server named {name!r} (added: {known})")

    def entries(self) -> list[McpEntry]:
        """Every MCP endpoint, ordered deterministically (ivoai servers by alias, then user entries)."""
        out: list[McpEntry] = []
        for profile in sorted(self.servers, key=lambda p: p.alias):
            for kind in sorted(profile.kinds):
                out.append(
                    McpEntry(
                        id=f"{profile.id}:{kind}",
                        name=f"{profile.alias}-{kind}",
                        transport="streamable-http",
                        url=profile.endpoint_url(kind),
                        argv=(),
                        scopes=tuple(s for s in profile.scopes if s.startswith(kind + ":")),
                        ownership="ivoai",
                        enabled=profile.enabled,
                        secret_id=profile.id,
                        kind=f"ivoai-{kind}",
                    )
                )
        for entry in sorted(self.mcp, key=lambda e: e.name):
            out.append(
                McpEntry(
                    id=entry.id,
                    name=entry.name,
                    transport="streamable-http",
                    url=entry.url,
                    argv=(),
                    scopes=(),
                    ownership="user",
                    enabled=entry.enabled,
                    secret_id=entry.id if entry.auth == "bearer" else None,
                    kind="user",
                )
            )
        return out


def _to_profile(m: _ServerModel) -> ServerProfile:
    """The profile of a file entry: field by field (unknown keys stay behind), lists as tuples."""
    values: dict[str, Any] = {f.name: getattr(m, f.name) for f in fields(ServerProfile)}
    values.update(scopes=tuple(m.scopes), warnings=tuple(m.warnings))
    values.update(endpoints=dict(m.endpoints), features=dict(m.features))
    return ServerProfile(**values)


def _from_profile(p: ServerProfile) -> _ServerModel:
    return _ServerModel.model_validate({f.name: getattr(p, f.name) for f in fields(ServerProfile)})


class ConnectionRegistry:
    """Load and mutate `connections.json` under a lock."""

    def __init__(self, paths: XdgPaths) -> None:
        self.paths = paths
        self.path = paths.config / REGISTRY_FILE
        self.lock_path = paths.config / REGISTRY_LOCK

    def load(self) -> RegistryState:
        """Read the registry (empty when absent).

        Raises:
            ValidationError: the file is not a registry this version understands.
        """
        raw = read_private_file_or_none(self.paths.config, self.path, JSON_STATE_MAX_BYTES)
        if raw is None:
            return RegistryState()
        try:
            model = _RegistryModel.model_validate_json(raw)
        except PydanticValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValidationError(f"{self.path}: invalid at {where}: {first['msg']}") from None
        if model.schema_version > REGISTRY_SCHEMA_VERSION:
            raise ValidationError(
                f"{self.path} has schema version {model.schema_version}, newer than this ivoai understands "
                f"({REGISTRY_SCHEMA_VERSION}); upgrade ivoai"
            )
        return RegistryState(
            servers=[_to_profile(s) for s in model.servers],
            mcp=[UserMcpServer(m.id, m.name, m.url, m.auth, m.enabled, m.created_at) for m in model.mcp],
            official={k: OfficialLogin(v.connected_at, v.last_status) for k, v in model.official.items()},
            extra=dict(model.model_extra or {}),
        )

    def _save(self, state: RegistryState) -> None:
        model = _RegistryModel(
            schema_version=REGISTRY_SCHEMA_VERSION,
            servers=[_from_profile(p) for p in state.servers],
            mcp=[
                _McpModel(
                    id=m.id, name=m.name, url=m.url, auth=m.auth, enabled=m.enabled, created_at=m.created_at
                )
                for m in state.mcp
            ],
            official={
                k: _OfficialModel(connected_at=v.connected_at, last_status=v.last_status)
                for k, v in state.official.items()
            },
            **state.extra,
        )
        atomic_write(self.paths.config, self.path, dumps_bytes(model.model_dump(mode="json")))

    @contextlib.contextmanager
    def update(self) -> Iterator[RegistryState]:
        """Lock, load, let the caller mutate the state, then write it atomically (only on success)."""
        with file_lock(self.paths.config, self.lock_path):
            state = self.load()
            yield state
            self._check_unique(state)
            self._save(state)

    @staticmethod
    def _check_unique(state: RegistryState) -> None:
        aliases = [p.alias for p in state.servers]
        if len(aliases) != len(set(aliases)):
            raise ConflictError("two servers would share one alias")
        names = [m.name for m in state.mcp]
        if len(names) != len(set(names)):
            raise ConflictError("two MCP servers would share one name")


def with_enabled(profile: ServerProfile, enabled: bool) -> ServerProfile:
    return replace(profile, enabled=enabled)
