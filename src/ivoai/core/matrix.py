"""The runtime-only component matrix: one row per component implementation, rendered by doctor.

It is built from existing state and live probes each time it is needed and is never written to
config, state or session files: it refuses to be pickled, and has no save method.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ivoai.core._text import bounded_reason
from ivoai.core.health import Health
from ivoai.core.provenance import Fallback, Provenance
from ivoai.core.support import Fact, Support


@dataclass(frozen=True)
class ComponentStatus:
    """What is known about one component: installed, available and healthy as separate facts."""

    component: str  # e.g. "codex"
    kind: str  # e.g. "executor", "compression_provider", "knowledge_source"
    implementation: str | None = None  # e.g. "CodexExecutor"; None when nothing was probed
    installed: Fact = Fact.NOT_PROBED
    available: Fact = Fact.NOT_PROBED
    health: Health = field(default_factory=Health.not_probed)
    version: str | None = None
    capabilities: Mapping[str, Support] = field(default_factory=dict)
    provenance: Provenance | None = None
    fallback: Fallback | None = None
    active: Fact = Fact.NOT_PROBED
    reason: str | None = None  # why this implementation is (not) active

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", bounded_reason(self.reason))
        object.__setattr__(self, "capabilities", dict(sorted(self.capabilities.items())))

    def support(self, capability: str) -> Support:
        """The recorded support for `capability`; UNKNOWN without evidence."""
        return self.capabilities.get(capability, Support.UNKNOWN)

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON shape."""
        return {
            "component": self.component,
            "kind": self.kind,
            "implementation": self.implementation,
            "installed": self.installed.value,
            "available": self.available.value,
            "health": self.health.to_dict(),
            "version": self.version,
            "capabilities": {k: v.value for k, v in self.capabilities.items()},
            "provenance": None if self.provenance is None else self.provenance.to_dict(),
            "fallback": None if self.fallback is None else self.fallback.to_dict(),
            "active": self.active.value,
            "reason": self.reason,
        }


class ComponentMatrix:
    """An ordered, read-only set of component rows (last row wins per (component, kind))."""

    def __init__(self, rows: Iterable[ComponentStatus] = ()) -> None:
        merged: dict[tuple[str, str], ComponentStatus] = {}
        for row in rows:
            merged[(row.component, row.kind)] = row
        self._rows = tuple(sorted(merged.values(), key=lambda r: (r.kind, r.component)))

    def __iter__(self) -> Iterator[ComponentStatus]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, component: str, kind: str | None = None) -> ComponentStatus | None:
        """The row for `component` (and `kind`, if given), or None."""
        for row in self._rows:
            if row.component == component and (kind is None or row.kind == kind):
                return row
        return None

    def support(self, component: str, capability: str) -> Support:
        """Capability support of a component; UNKNOWN when the component or the evidence is missing."""
        row = self.get(component)
        return Support.UNKNOWN if row is None else row.support(capability)

    def to_list(self) -> list[dict[str, Any]]:
        """Rows as JSON-ready dicts, for rendering only."""
        return [row.to_dict() for row in self._rows]

    def __reduce__(self) -> NoReturn:
        raise TypeError("ComponentMatrix is runtime-only and is never persisted")
