"""Registry operations behind `ivoai connect …` / `ivoai disconnect …` (no network, except none)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from ivoai.client.config.secrets import SecretsStore, new_secret_id
from ivoai.client.connections.official import Provider
from ivoai.client.connections.registry import (
    ConnectionRegistry,
    OfficialLogin,
    RegistryState,
    UserMcpServer,
    now_iso,
)
from ivoai.client.connections.urls import normalize_server_url
from ivoai.client.knowledge.profiles import ServerProfile, validate_name
from ivoai.common.errors import ConflictError, ValidationError
from ivoai.common.paths import XdgPaths

TOKEN_MAX_CHARS = 4096
_Entry = TypeVar("_Entry", ServerProfile, UserMcpServer)
_TOKEN_RE = re.compile(r"^[\x21-\x7e]+$")


def list_servers(paths: XdgPaths) -> list[ServerProfile]:
    """Enrolled servers by alias."""
    return sorted(ConnectionRegistry(paths).load().servers, key=lambda p: p.alias)


def show_server(paths: XdgPaths, alias: str) -> ServerProfile:
    return ConnectionRegistry(paths).load().server(alias)


def set_enabled(paths: XdgPaths, alias: str, enabled: bool) -> ServerProfile:
    """Enable or disable a server for routing (its credential is kept either way)."""
    with ConnectionRegistry(paths).update() as state:
        profile = replace(state.server(alias), enabled=enabled)
        state.replace_server(profile)
    return profile


def remove_server(paths: XdgPaths, alias: str) -> ServerProfile:
    """Forget a server: registry entry first, then its credential (a crash between leaves an orphan)."""
    return _forget(paths, lambda state: state.server(alias))


def _forget(paths: XdgPaths, find: Callable[[RegistryState], _Entry]) -> _Entry:
    """Remove the entry `find` names: registry first, then its credential (a crash between leaves an
    orphaned secret, never an entry without its credential)."""
    with ConnectionRegistry(paths).update() as state:
        entry = find(state)
        state.servers = [p for p in state.servers if p.id != entry.id]
        state.mcp = [m for m in state.mcp if m.id != entry.id]
    SecretsStore(paths).delete(entry.id)
    return entry


def _validate_token(token: str) -> str:
    token = token.strip()
    if not token or len(token) > TOKEN_MAX_CHARS or not _TOKEN_RE.match(token):
        raise ValidationError(
            f"bearer token must be one line of 1-{TOKEN_MAX_CHARS} visible ASCII characters"
        )
    return token


def add_mcp(paths: XdgPaths, name: str, url: str, token: str | None) -> UserMcpServer:
    """Register a user HTTP MCP server; an optional bearer token goes to the secrets store.

    Raises:
        ValidationError: bad name, URL or token. ConflictError: the name is taken.
    """
    validate_name("name", name)
    normalized = normalize_server_url(url, field="URL")
    entry = UserMcpServer(
        new_secret_id("mcp"), name, normalized, "bearer" if token else "none", True, now_iso()
    )
    registry = ConnectionRegistry(paths)
    if any(m.name == name for m in registry.load().mcp):
        raise ConflictError(f"an MCP server named {name!r} already exists; remove it first")
    if token:
        SecretsStore(paths).put(entry.id, _validate_token(token))
    with registry.update() as state:
        if any(m.name == name for m in state.mcp):
            raise ConflictError(f"an MCP server named {name!r} already exists; remove it first")
        state.mcp.append(entry)
    return entry


def list_mcp(paths: XdgPaths) -> list[UserMcpServer]:
    return sorted(ConnectionRegistry(paths).load().mcp, key=lambda m: m.name)


def set_mcp_enabled(paths: XdgPaths, name: str, enabled: bool) -> UserMcpServer:
    with ConnectionRegistry(paths).update() as state:
        entry = replace(state.user_mcp(name), enabled=enabled)
        state.mcp = [entry if m.id == entry.id else m for m in state.mcp]
    return entry


def remove_mcp(paths: XdgPaths, name: str) -> UserMcpServer:
    return _forget(paths, lambda state: state.user_mcp(name))


def record_official(paths: XdgPaths, provider: Provider, detail: str) -> None:
    """Note (without any credential) that an official login was confirmed."""
    with ConnectionRegistry(paths).update() as state:
        state.official[provider] = OfficialLogin(now_iso(), detail)


def forget_official(paths: XdgPaths, provider: Provider) -> bool:
    """Drop ivoai's note; the official client's own login is never touched."""
    with ConnectionRegistry(paths).update() as state:
        return state.official.pop(provider, None) is not None


def disconnect_all(paths: XdgPaths) -> dict[str, list[str]]:
    """Remove every ivoai-owned connection (servers, MCP entries, official notes) and their secrets."""
    with ConnectionRegistry(paths).update() as state:
        servers, mcp, official = list(state.servers), list(state.mcp), sorted(state.official)
        state.servers, state.mcp, state.official = [], [], {}
    store = SecretsStore(paths)
    for secret_id in [p.id for p in servers] + [m.id for m in mcp]:
        store.delete(secret_id)
    return {
        "servers": sorted(p.alias for p in servers),
        "mcp": sorted(m.name for m in mcp),
        "official": official,
    }
