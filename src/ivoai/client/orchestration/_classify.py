"""The limit classifier: what a limit signal means and what to do about it (AUTO.md). Pure.

- transient (overload, HTTP 429/529/503, JSON-RPC -32001, "at capacity", an `allowed_warning`
  event) -> back off;
- model-scoped (Codex `limit_name` other than `codex` or "switch to another model"; Claude
  `seven_day_opus` / `seven_day_sonnet`) -> a cheaper model of the same vendor;
- account hard limit -> only when *confirmed*: a `rejected` account-level rate-limit event, or a
  fresh quota read that shows the limit. Message text alone ("You've hit your usage limit") never
  confirms: it asks the caller to re-read the quota (`reprobe`) and classify again with it; if the
  fresh read does not show the limit, the signal is treated as transient.

The supervisor of issue 16 consumes the same verdicts (`kind == HARD_LIMIT and confirmed`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from ivoai.client.orchestration._quota import CLAUDE_LIMIT_TYPES, VendorQuota, parse_reset

SignalSource = Literal["rate_limit_event", "rpc_error", "http_status", "message"]
Action = Literal["none", "warn", "backoff", "cheaper_model", "stop_vendor", "reprobe"]

TRANSIENT_BACKOFF_SECONDS = 30.0  # first retry delay after an overload
TRANSIENT_BACKOFF_MAX_SECONDS = 15 * 60.0
_USAGE_LIMIT = re.compile(
    r"usage.?limit|usagelimitexceeded|hit your (usage )?limit|limit reached|rate.?limit.?reached|"
    r"out of (credits|usage)|quota (exceeded|exhausted)",
    re.IGNORECASE,
)
_MODEL_SCOPED = re.compile(r"switch to another model|for this model|model.?specific limit", re.IGNORECASE)
_TRANSIENT = re.compile(
    r"overload|at capacity|temporarily unavailable|try again (later|shortly)|too many requests|"
    r"\b(429|529|503)\b",
    re.IGNORECASE,
)


class LimitKind(StrEnum):
    """What a signal means."""

    NONE = "none"
    TRANSIENT = "transient"
    MODEL_SCOPED = "model_scoped"
    HARD_LIMIT = "hard_limit"
    UNCONFIRMED = "unconfirmed"  # looks like a hard limit; needs a fresh quota read first


@dataclass(frozen=True)
class LimitSignal:
    """One observation that may concern a limit."""

    vendor: str
    source: SignalSource
    message: str = ""
    code: int | None = None  # JSON-RPC error code or HTTP status
    info: Mapping[str, Any] | None = None  # Claude `rate_limit_info`
    limit_name: str | None = None  # Codex limit name, when the source gives it
    model: str | None = None  # the model that was running


@dataclass(frozen=True)
class LimitVerdict:
    """The classification and the action it calls for."""

    kind: LimitKind
    action: Action
    reason: str
    confirmed: bool = False
    backoff_seconds: float = 0.0
    model: str | None = None  # the model a model-scoped limit concerns
    resets_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form for worker results and session metadata."""
        return {
            "kind": self.kind.value,
            "action": self.action,
            "reason": self.reason,
            "confirmed": self.confirmed,
            "backoff_seconds": self.backoff_seconds,
            "model": self.model,
            "resets_at": self.resets_at,
        }


def backoff(attempt: int) -> float:
    """Exponential back-off for the n-th transient failure (0-based), capped."""
    return float(min(TRANSIENT_BACKOFF_MAX_SECONDS, TRANSIENT_BACKOFF_SECONDS * 2 ** max(0, attempt)))


def _from_event(signal: LimitSignal) -> LimitVerdict:
    info = signal.info or {}
    status = info.get("status")
    limit_type = str(info.get("rateLimitType"))
    resets = parse_reset(info.get("resetsAt"))
    if status == "allowed":
        return LimitVerdict(LimitKind.NONE, "none", "allowed")
    if status == "allowed_warning":
        return LimitVerdict(
            LimitKind.TRANSIENT, "warn", f"approaching the {limit_type} limit", resets_at=resets
        )
    if status == "rejected":
        _, model = CLAUDE_LIMIT_TYPES.get(limit_type, ("session", None))
        if model is not None:
            return LimitVerdict(
                LimitKind.MODEL_SCOPED,
                "cheaper_model",
                f"{limit_type} rejected",
                model=model,
                resets_at=resets,
            )
        return LimitVerdict(
            LimitKind.HARD_LIMIT,
            "stop_vendor",
            f"{limit_type} rejected by the service",
            True,
            resets_at=resets,
        )
    return LimitVerdict(LimitKind.NONE, "none", f"unrecognised status {str(status)[:32]!r}")


def classify(signal: LimitSignal, fresh: VendorQuota | None = None, *, attempt: int = 0) -> LimitVerdict:
    """Classify `signal`; `fresh` is a quota read taken *after* it (within the cache TTL), if any."""
    if signal.source == "rate_limit_event":
        return _from_event(signal)
    text = signal.message or ""
    if signal.source == "rpc_error" and signal.code == -32001:
        return LimitVerdict(
            LimitKind.TRANSIENT, "backoff", "codex app-server overloaded", backoff_seconds=backoff(attempt)
        )
    if signal.source == "http_status" and signal.code in (429, 503, 529) and not _USAGE_LIMIT.search(text):
        return LimitVerdict(
            LimitKind.TRANSIENT,
            "backoff",
            f"HTTP {signal.code} from the service",
            backoff_seconds=backoff(attempt),
        )
    limit_name = (signal.limit_name or "").strip().lower()
    if (limit_name and limit_name != "codex") or (_USAGE_LIMIT.search(text) and _MODEL_SCOPED.search(text)):
        return LimitVerdict(
            LimitKind.MODEL_SCOPED,
            "cheaper_model",
            "limit of one model (switch to another model)",
            model=signal.model,
        )
    if _USAGE_LIMIT.search(text) or (signal.source == "http_status" and signal.code == 429):
        if (
            fresh is not None
            and not fresh.stale
            and fresh.hard_limit is not None
            and fresh.hard_limit.confirmed
        ):
            h = fresh.hard_limit
            return LimitVerdict(
                LimitKind.HARD_LIMIT,
                "stop_vendor",
                f"confirmed by a fresh quota read ({h.reason})",
                True,
                resets_at=h.resets_at,
            )
        if fresh is not None and not fresh.stale:
            return LimitVerdict(
                LimitKind.TRANSIENT,
                "backoff",
                "the limit message is not confirmed by a fresh quota read",
                backoff_seconds=backoff(attempt),
            )
        return LimitVerdict(
            LimitKind.UNCONFIRMED, "reprobe", "limit message: re-read the quota before acting"
        )
    if _TRANSIENT.search(text):
        return LimitVerdict(
            LimitKind.TRANSIENT, "backoff", "service overloaded", backoff_seconds=backoff(attempt)
        )
    return LimitVerdict(LimitKind.NONE, "none", "not a limit")
