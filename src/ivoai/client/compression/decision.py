"""The per-session compression decision (seed 003 and seed 002's launch decision tree), pure logic.

    requested provider
      -> --direct, or `direct` requested           -> Direct (no bypass)
      -> authoritative memory/context in the session's MCP projection
                                                   -> Direct, bypass (the fidelity rule; provider-neutral)
      -> executor cannot run behind the provider   -> Direct, fallback (OpenCode is direct-only)
      -> provider preflight fails                  -> Direct, fallback, reason = the preflight code
      -> otherwise                                 -> the provider

Providers are mutually exclusive: the result names exactly one effective provider, never a chain.
"""

from __future__ import annotations

DIRECT = "direct"
REASON_DIRECT_REQUESTED = "direct_requested"
REASON_AUTHORITATIVE = "authoritative_knowledge"
REASON_EXECUTOR_DIRECT_ONLY = "executor_direct_only"
REASON_CONFIG_INVALID = "config_invalid"  # config.toml could not be read: fail open to the official client


class CompressionSetting:
    """The requested provider and the source of that choice."""

    __slots__ = ("provider", "source")

    def __init__(self, provider: str, source: str) -> None:
        self.provider = provider
        self.source = source

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompressionSetting):
            return NotImplemented
        return (self.provider, self.source) == (other.provider, other.source)

    def __repr__(self) -> str:
        return f"CompressionSetting({self.provider!r}, {self.source!r})"


class Decision:
    """Requested and effective provider, and why they differ (bounded, content-free)."""

    __slots__ = ("authoritative_sources", "bypass", "effective", "fallback", "reason", "requested", "source")

    def __init__(
        self,
        requested: str,
        effective: str,
        source: str,
        *,
        reason: str | None = None,
        bypass: bool = False,
        fallback: bool = False,
        authoritative_sources: int = 0,
    ) -> None:
        self.requested = requested
        self.effective = effective
        self.source = source
        self.reason = reason
        self.bypass = bypass
        self.fallback = fallback
        self.authoritative_sources = authoritative_sources

    def as_dict(self) -> dict[str, object]:
        """The decision as recorded in the session record and telemetry."""
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        return f"Decision({self.as_dict()!r})"


def choose(
    setting: CompressionSetting,
    *,
    supported: tuple[str, ...],
    authoritative_sources: int,
) -> tuple[str | None, Decision | None]:
    """(provider to preflight, None) or (None, final Direct decision) before any preflight runs."""
    requested = setting.provider
    if requested == DIRECT:
        reason = {"flag": REASON_DIRECT_REQUESTED, "config_invalid": REASON_CONFIG_INVALID}.get(
            setting.source
        )
        return None, Decision(
            requested, DIRECT, setting.source, reason=reason, authoritative_sources=authoritative_sources
        )
    if authoritative_sources > 0:
        return None, Decision(
            requested,
            DIRECT,
            setting.source,
            reason=REASON_AUTHORITATIVE,
            bypass=True,
            authoritative_sources=authoritative_sources,
        )
    if requested not in supported:
        return None, Decision(
            requested, DIRECT, setting.source, reason=REASON_EXECUTOR_DIRECT_ONLY, fallback=True
        )
    return requested, None


def after_preflight(setting: CompressionSetting, provider: str, failure_code: str | None) -> Decision:
    """The decision once `provider`'s preflight passed (failure_code None) or failed."""
    if failure_code is None:
        return Decision(setting.provider, provider, setting.source)
    return Decision(setting.provider, DIRECT, setting.source, reason=failure_code, fallback=True)
