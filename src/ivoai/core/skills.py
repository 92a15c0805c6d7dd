"""Replaceable contracts for skills and tools: identity, probe and discovery only (seed 002).

A `SkillSource` is where skills come from (ivoai's package data, a local directory, a git commit,
an archive); a `SkillRegistry` is what is installed; a `ToolProvider` offers tools to an agent.
They say *what* exists and whether it is healthy, never how a skill is staged, selected or
attached: that is the client's skill control plane (`ivoai.client.skills`). Runtime-only, like the
rest of `ivoai.core`: nothing here is persisted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ivoai.core.health import Health


@dataclass(frozen=True)
class SkillRef:
    """One skill as a source or registry names it: metadata only, never its body."""

    name: str
    description: str
    version: str | None = None
    digest: str | None = None  # `sha256:<hex>` of the stored tree, when it is stored


@dataclass(frozen=True)
class ToolRef:
    """One tool a provider offers; `read_only` is the provider's own claim (never trusted for policy)."""

    name: str
    description: str = ""
    read_only: bool = False


@runtime_checkable
class SkillSource(Protocol):
    """Where skills come from."""

    @property
    def source_id(self) -> str:
        """Stable, provider-neutral identity (e.g. `builtin`, `dir:/path`)."""
        ...

    @property
    def kind(self) -> str:
        """`builtin`, `dir`, `git` or `archive`."""
        ...

    def probe(self) -> Health:
        """Is the source reachable and readable now (without staging anything)?"""
        ...

    def discover(self) -> Sequence[SkillRef]:
        """The skills it holds, from front matter only; nothing is executed or stored."""
        ...


@runtime_checkable
class SkillRegistry(Protocol):
    """What is installed."""

    def probe(self) -> Health:
        """Is the registry readable and consistent?"""
        ...

    def skills(self) -> Sequence[SkillRef]:
        """Every active, enabled skill."""
        ...

    def get(self, name: str) -> SkillRef | None:
        """One active, enabled skill by name."""
        ...


@runtime_checkable
class ToolProvider(Protocol):
    """Something that offers tools to an agent (an MCP server, a built-in tool set)."""

    @property
    def provider_id(self) -> str: ...

    def probe(self) -> Health: ...

    def tools(self) -> Sequence[ToolRef]:
        """The tools it offers now."""
        ...
