"""`RunMetrics.context` and `RunMetrics.artifacts`: verifiable measurements, never content (seed 001).

Only counts, sizes, fingerprints, codes and modes are recorded: no payload, preview text, prompt or
path ever enters a metric, whatever the sensitivity (internal and restricted content must never
reach observability as a body). Prompt-cache figures keep the provider's answer: a declared zero
stays zero, and an unreported value stays None (unknown), never zero.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ivoai.client.workingcontext import Capture


@dataclass
class PromptCacheMetrics:
    """Declared prompt-cache availability and the provider's actual read/write tokens."""

    declared_available: bool | None = None
    read_tokens: int | None = None
    write_tokens: int | None = None

    def add_usage(self, *, read_tokens: int | None, write_tokens: int | None) -> None:
        """Aggregate one provider usage record; None (not reported) never turns a known value unknown."""
        if read_tokens is not None:
            self.read_tokens = (self.read_tokens or 0) + read_tokens
        if write_tokens is not None:
            self.write_tokens = (self.write_tokens or 0) + write_tokens


@dataclass
class ContextMetrics:
    """Prefix fingerprint, threshold checks and compactions of one run."""

    prefix_sha256: str | None = None
    prefix_bytes: int = 0
    checks: int = 0
    compactions: int = 0
    last_reason: str | None = None
    last_tokens_before: int = 0
    last_tokens_after: int = 0
    last_summary_sha256: str | None = None
    prompt_cache: PromptCacheMetrics = field(default_factory=PromptCacheMetrics)

    def record_prefix(self, sha256: str, byte_length: int) -> None:
        """Remember the fingerprint of the stable prefix sent with this run's requests."""
        self.prefix_sha256 = sha256
        self.prefix_bytes = byte_length


@dataclass
class ArtifactMetrics:
    """What the store kept and what the primary was spared, in bytes and counts."""

    stored: int = 0
    stored_bytes: int = 0
    truncated: int = 0
    refused_credentials: int = 0
    degraded: int = 0
    projected_bytes: int = 0
    withheld_bytes: int = 0
    modes: dict[str, int] = field(default_factory=dict)
    degraded_reasons: list[str] = field(default_factory=list)

    def record(self, cap: Capture) -> None:
        """Count one capture: sizes and modes only."""
        proj = cap.projection
        self.modes[proj.mode] = self.modes.get(proj.mode, 0) + 1
        projected = len(proj.text.encode("utf-8"))
        self.projected_bytes += projected
        self.withheld_bytes += max(0, proj.total_bytes - proj.head_bytes - proj.tail_bytes)
        if cap.result_ref is not None:
            ref = cap.result_ref.ref
            self.stored += 1
            self.stored_bytes += ref.size
            if ref.state.value == "truncated":
                self.truncated += 1
        elif proj.mode == "withheld":
            self.refused_credentials += 1
        elif proj.mode == "degraded":
            self.degraded += 1
            if proj.reason is not None and len(self.degraded_reasons) < 16:
                # The reason is a code plus a redacted store message, never payload bytes.
                self.degraded_reasons.append(proj.reason.split(":", 1)[0])


@dataclass
class RunMetrics:
    """Measurements of one run: `context` and `artifacts`."""

    context: ContextMetrics = field(default_factory=ContextMetrics)
    artifacts: ArtifactMetrics = field(default_factory=ArtifactMetrics)

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"context": asdict(self.context), "artifacts": asdict(self.artifacts)}
