"""ServerProfile and the deterministic grouping of profiles into logical knowledge sources (pools).

A *profile* is one enrolled ivoai server. A *source* (a ServerPool) is what the router federates:
profiles that share a purpose and a redundancy group are equivalent replicas of one source, tried in
priority order (lower first, then alias, then ID); a profile without a redundancy group is a source of
its own. Purposes never mix: two groups with the same name but different purposes are different
sources. Nothing here performs I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from ivoai.client.knowledge.errors import DisabledSourceError, UnknownSourceError
from ivoai.common.errors import ValidationError

Kind = Literal["context", "memory"]
KINDS: tuple[Kind, ...] = ("context", "memory")

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
PRIORITY_DEFAULT = 100
PRIORITY_MAX = 100_000


def validate_name(field_name: str, value: str) -> str:
    """Return `value` if it is a valid alias/purpose/group name, else raise naming the field and rule."""
    if not NAME_RE.fullmatch(value):
        raise ValidationError(
            f"{field_name} {value!r} is invalid: use 1-63 characters from a-z, 0-9, '-' and '_', "
            "starting with a letter or digit"
        )
    return value


def validate_priority(value: int) -> int:
    """Priorities are integers in [0, PRIORITY_MAX]; lower is tried first."""
    if not 0 <= value <= PRIORITY_MAX:
        raise ValidationError(
            f"priority {value} is out of range: use 0..{PRIORITY_MAX} (lower is tried first)"
        )
    return value


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of `url`, lower-cased, default ports dropped."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is None or (scheme, port) in (("http", 80), ("https", 443)):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


@dataclass(frozen=True)
class ServerProfile:
    """One enrolled ivoai server. The credential is stored separately, keyed by `id`."""

    id: str
    alias: str
    base_url: str
    purpose: str
    redundancy_group: str | None = None
    priority: int = PRIORITY_DEFAULT
    enabled: bool = True
    client_id: str = ""
    scopes: tuple[str, ...] = ()
    protocol_version: int = 1
    server_version: str = ""
    endpoints: Mapping[str, str] = field(default_factory=dict)
    features: Mapping[str, bool] = field(default_factory=dict)
    enrolled_at: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def origin(self) -> str:
        return origin_of(self.base_url)

    @property
    def kinds(self) -> frozenset[Kind]:
        """The knowledge kinds this server offers (feature advertised and endpoint known)."""
        out: set[Kind] = set()
        for kind in KINDS:
            if self.features.get(kind, False) and self.endpoints.get(f"{kind}_mcp"):
                out.add(kind)
        return frozenset(out)

    def endpoint_url(self, kind: Kind) -> str:
        """Absolute URL of this server's MCP endpoint for `kind`, always on the profile's own origin."""
        path = self.endpoints.get(f"{kind}_mcp", "")
        if not path.startswith("/"):
            raise ValidationError(f"server {self.alias!r} has no {kind} MCP endpoint")
        return self.origin + path

    @property
    def pool_key(self) -> tuple[str, str]:
        """Replicas share (purpose, redundancy group); an ungrouped profile is alone in its pool."""
        if self.redundancy_group:
            return (self.purpose, "group:" + self.redundancy_group)
        return (self.purpose, "profile:" + self.id)

    def sort_key(self) -> tuple[int, str, str]:
        return (self.priority, self.alias, self.id)


@dataclass(frozen=True)
class KnowledgeSource:
    """One logical source (a ServerPool): its members are equivalent replicas in failover order."""

    id: str
    alias: str
    purpose: str
    redundancy_group: str | None
    members: tuple[ServerProfile, ...]
    authoritative: bool = True

    @property
    def kinds(self) -> frozenset[Kind]:
        out: set[Kind] = set()
        for member in self.members:
            out |= member.kinds
        return frozenset(out)

    @property
    def primary(self) -> ServerProfile:
        return self.members[0]

    def names(self) -> frozenset[str]:
        """Every selector that names this source: its ID, alias, purpose and member aliases."""
        return frozenset({self.id, self.alias, self.purpose, *(m.alias for m in self.members)})


def build_sources(profiles: Iterable[ServerProfile]) -> list[KnowledgeSource]:
    """Group the *enabled* profiles into sources, deterministically ordered by source ID."""
    pools: dict[tuple[str, str], list[ServerProfile]] = {}
    for profile in profiles:
        if profile.enabled:
            pools.setdefault(profile.pool_key, []).append(profile)
    sources: list[KnowledgeSource] = []
    for (purpose, _key), members in pools.items():
        members.sort(key=ServerProfile.sort_key)
        group = members[0].redundancy_group
        if group:
            sid, alias = f"{purpose}/{group}", group
        else:
            sid, alias = members[0].alias, members[0].alias
        sources.append(KnowledgeSource(sid, alias, purpose, group, tuple(members)))
    sources.sort(key=lambda s: s.id)
    return sources


def select_sources(profiles: Sequence[ServerProfile], selectors: Sequence[str] = ()) -> list[KnowledgeSource]:
    """The sources a session routes to: every enabled one, or exactly those the selectors name.

    Raises:
        UnknownSourceError: a selector names nothing enrolled (the message lists the valid choices).
        DisabledSourceError: a selector names only disabled servers.
    """
    enabled = build_sources(profiles)
    if not selectors:
        return enabled
    chosen: dict[str, KnowledgeSource] = {}
    for selector in selectors:
        matches = [s for s in enabled if selector in s.names()]
        if matches:
            for source in matches:
                chosen[source.id] = source
            continue
        disabled = [
            p
            for p in profiles
            if not p.enabled and selector in {p.alias, p.purpose, p.redundancy_group or ""}
        ]
        choices = sorted({name for s in enabled for name in s.names()})
        listing = ", ".join(choices) if choices else "none (enroll one with `ivoai connect server add`)"
        if disabled:
            raise DisabledSourceError(
                f"knowledge source {selector!r} is disabled (enable it with `ivoai connect server enable "
                f"{disabled[0].alias}`); enabled choices: {listing}"
            )
        raise UnknownSourceError(f"unknown knowledge source {selector!r}; valid choices: {listing}")
    return sorted(chosen.values(), key=lambda s: s.id)


ServerPool = KnowledgeSource  # the seed's name for a group of equivalent replicas
