"""Capability support and probe facts: what a component can do, and what we actually observed."""

from __future__ import annotations

from enum import StrEnum


class Support(StrEnum):
    """Whether an implementation supports a capability."""

    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"
    UNKNOWN = "unknown"  # no evidence either way; never inferred from a name or version
    NOT_EXPOSED = "not_exposed"  # the implementation may have it, but ivoai does not offer it


class Fact(StrEnum):
    """A separately probed fact (installed, available, ...): observed yes/no, unknown, or not probed."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"  # a probe ran but could not tell
    NOT_PROBED = "not_probed"  # no probe ran

    @classmethod
    def of(cls, value: bool | None) -> Fact:
        """YES/NO from a boolean observation, UNKNOWN for None."""
        if value is None:
            return cls.UNKNOWN
        return cls.YES if value else cls.NO
