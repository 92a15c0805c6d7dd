"""Where a fact or a selection came from, and explicit fallback metadata."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ivoai.core._text import bounded_reason


class Source(StrEnum):
    """The kind of evidence behind a value."""

    PROBE = "probe"  # a command or request ran and answered
    MANIFEST = "manifest"  # ivoai's pinned component manifest / ownership manifest
    CONFIG = "config"  # the user's config.toml
    DEFAULT = "default"  # a built-in default, nothing observed
    BUILTIN = "builtin"  # compiled into ivoai


@dataclass(frozen=True)
class Provenance:
    """Evidence for a component's identity: source, optional detail (e.g. the probe argv), version, digest."""

    source: Source
    detail: str | None = None
    version: str | None = None
    digest: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "detail", bounded_reason(self.detail))

    def to_dict(self) -> dict[str, object]:
        """Stable JSON shape."""
        return {
            "source": self.source.value,
            "detail": self.detail,
            "version": self.version,
            "digest": self.digest,
        }


@dataclass(frozen=True)
class Fallback:
    """An explicit fallback: what was requested, what is effective, and why."""

    requested: str
    effective: str
    reason: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", bounded_reason(self.reason) or "")

    @property
    def fell_back(self) -> bool:
        """True when the effective implementation differs from the requested one."""
        return self.requested != self.effective

    def to_dict(self) -> dict[str, object]:
        """Stable JSON shape."""
        return {
            "requested": self.requested,
            "effective": self.effective,
            "reason": self.reason,
            "fell_back": self.fell_back,
        }
