"""Normalized quota: windows per vendor, pace, pressure, and the normalizers of each source (pure).

Sources (AUTO.md, "Quota"):

- Codex: `codex app-server` `account/rateLimits/read` (`GetAccountRateLimitsResponse`: `rateLimits`
  and `rateLimitsByLimitId`, windows `{usedPercent, windowDurationMins, resetsAt}` in Unix seconds)
  and its sparse `account/rateLimits/updated` notifications.
- Claude: the statusline payload (`rate_limits.five_hour|seven_day.{used_percentage, resets_at}`,
  `resets_at` as epoch seconds or an ISO string) and `rate_limit_event` from every `-p` worker
  (`rate_limit_info.{status, resetsAt, rateLimitType, utilization}`).

Rules: values are clamped to 0-100 and remaining = 100 - used; unknown stays unknown (`None`, a
`pending` or `not_exposed` state), exhaustion is never invented; a window scoped to one model
(Codex `limitName` other than `codex`, Claude `seven_day_opus|seven_day_sonnet`) blocks that model
only. A *confirmed* hard limit needs a fresh read (or a `rejected` event), never message text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from ivoai.common.validate import is_int

VENDORS = ("codex", "claude")
WindowKind = Literal["session", "weekly", "monthly", "credits"]
AuthState = Literal["authenticated", "unauthenticated", "unknown"]
QuotaState = Literal["known", "pending", "not_exposed", "unknown", "error"]

SOURCE_CODEX_APP_SERVER = "codex_app_server"
SOURCE_CLAUDE_STATUSLINE = "claude_statusline"
SOURCE_CLAUDE_EVENT = "claude_rate_limit_event"
SOURCE_CODEX_EXEC = "codex_exec"

# Claude's `rateLimitType` values: the window they describe and the model family they scope.
CLAUDE_LIMIT_TYPES: Mapping[str, tuple[WindowKind, str | None]] = {
    "five_hour": ("session", None),
    "seven_day": ("weekly", None),
    "seven_day_opus": ("weekly", "opus"),
    "seven_day_sonnet": ("weekly", "sonnet"),
    "overage": ("monthly", None),
}


def clamp_percent(value: Any) -> float | None:
    """A used percentage clamped to 0-100; None for anything that is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(min(100.0, max(0.0, value)))


def parse_reset(value: Any) -> float | None:
    """`resets_at` as epoch seconds (int/float, or milliseconds when implausibly large) or ISO 8601."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value) and value > 0:
        return float(value / 1000 if value > 1e11 else value)
    if isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            return (
                float(text)
                if text.replace(".", "", 1).isdigit()
                else datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
            )
        except ValueError:
            return None
    return None


def kind_for_minutes(minutes: int | None, default: WindowKind = "session") -> WindowKind:
    """A window's kind from its length: up to a day is a session, up to 8 days weekly, else monthly."""
    if minutes is None:
        return default
    if minutes <= 24 * 60:
        return "session"
    if minutes <= 8 * 24 * 60:
        return "weekly"
    return "monthly"


@dataclass(frozen=True)
class Pace:
    """Used % against elapsed % of the window: `delta` > 0 means burning faster than the clock."""

    used_percent: float
    elapsed_percent: float

    @property
    def delta(self) -> float:
        """used - elapsed, in percentage points."""
        return round(self.used_percent - self.elapsed_percent, 1)


@dataclass(frozen=True)
class QuotaWindow:
    """One normalized window of one vendor (optionally scoped to one model)."""

    vendor: str
    kind: WindowKind
    used_percent: float | None
    resets_at: float | None
    window_minutes: int | None
    source: str
    observed_at: float
    model: str | None = None
    status: str | None = None  # Claude: allowed | allowed_warning | rejected
    authoritative: bool = True

    @property
    def key(self) -> str:
        """Identity in the ledger: vendor, kind and model scope."""
        return f"{self.vendor}:{self.kind}:{self.model or '*'}"

    @property
    def remaining_percent(self) -> float | None:
        """100 - used, or None when used is unknown."""
        return None if self.used_percent is None else round(100.0 - self.used_percent, 2)

    @property
    def exhausted(self) -> bool:
        """Used up by the source's own word: 100 % used or a `rejected` status. Never inferred."""
        return (self.used_percent is not None and self.used_percent >= 100.0) or self.status == "rejected"

    def is_stale(self, now: float, ttl_seconds: float) -> bool:
        """Older than the cache TTL."""
        return now - self.observed_at > ttl_seconds

    def expired(self, now: float) -> bool:
        """Its reset time has passed: the numbers describe a window that is over."""
        return self.resets_at is not None and self.resets_at <= now

    def pace(self, now: float) -> Pace | None:
        """Pace against the window's elapsed time, when used, length and reset are all known."""
        if self.used_percent is None or self.resets_at is None or not self.window_minutes:
            return None
        length = self.window_minutes * 60.0
        elapsed = min(length, max(0.0, length - (self.resets_at - now)))
        return Pace(self.used_percent, round(100.0 * elapsed / length, 1))

    def to_dict(self) -> dict[str, Any]:
        """JSON form (stable keys)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> QuotaWindow | None:
        """Parse a stored window; None when malformed (a bad entry is dropped, never trusted)."""
        try:
            kind = doc["kind"]
            if kind not in ("session", "weekly", "monthly", "credits") or doc["vendor"] not in VENDORS:
                return None
            minutes = doc.get("window_minutes")
            return cls(
                vendor=doc["vendor"],
                kind=kind,
                used_percent=clamp_percent(doc.get("used_percent")),
                resets_at=parse_reset(doc.get("resets_at")),
                window_minutes=minutes if isinstance(minutes, int) and minutes > 0 else None,
                source=str(doc["source"])[:64],
                observed_at=float(doc["observed_at"]),
                model=str(doc["model"])[:128] if doc.get("model") else None,
                status=str(doc["status"])[:32] if doc.get("status") else None,
                authoritative=bool(doc.get("authoritative", True)),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class HardLimit:
    """An account-level limit; `confirmed` only from a fresh quota read or a `rejected` event."""

    vendor: str
    confirmed: bool
    source: str
    observed_at: float
    resets_at: float | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


@dataclass(frozen=True)
class VendorQuota:
    """Everything known about one vendor's subscription quota right now."""

    vendor: str
    auth: AuthState = "unknown"
    state: QuotaState = "unknown"
    windows: tuple[QuotaWindow, ...] = ()
    hard_limit: HardLimit | None = None
    observed_at: float | None = None
    plan_type: str | None = None
    error: str | None = None
    stale: bool = False

    def window(self, kind: WindowKind, model: str | None = None) -> QuotaWindow | None:
        """The window of this kind (and model scope), if known."""
        return next((w for w in self.windows if w.kind == kind and w.model == model), None)

    def blocked_models(self) -> set[str]:
        """Models whose own window is exhausted (the rest of the vendor stays usable)."""
        return {w.model for w in self.windows if w.model and w.exhausted}

    def model_blocked(self, model_id: str, aliases: Iterable[str] = ()) -> bool:
        """True when a model-scoped exhausted window matches this model (ID or family alias)."""
        names = {model_id.lower(), *(a.lower() for a in aliases)}
        for scope in self.blocked_models():
            s = scope.lower()
            if any(s == n or s in n.split("-") or n.startswith(s) for n in names):
                return True
        return False

    def pressure(self, model_id: str | None = None, aliases: Iterable[str] = ()) -> int:
        """100 - min remaining % over authoritative windows that apply (unknown counts as 50)."""
        names = {(model_id or "").lower(), *(a.lower() for a in aliases)}
        remaining = [
            w.remaining_percent
            for w in self.windows
            if w.authoritative
            and w.remaining_percent is not None
            and (
                w.model is None
                or w.model.lower() in names
                or any(n.startswith(w.model.lower()) for n in names)
            )
        ]
        if not remaining:
            return 50
        return int(round(100 - min(remaining)))

    def to_dict(self) -> dict[str, Any]:
        """JSON form with the windows sorted by key."""
        return {
            "vendor": self.vendor,
            "auth": self.auth,
            "state": self.state,
            "windows": [w.to_dict() for w in sorted(self.windows, key=lambda w: w.key)],
            "hard_limit": None if self.hard_limit is None else self.hard_limit.to_dict(),
            "observed_at": self.observed_at,
            "plan_type": self.plan_type,
            "error": self.error,
            "stale": self.stale,
        }


# --- Codex: app-server `GetAccountRateLimitsResponse` and `AccountRateLimitsUpdatedNotification` ---


def _codex_window(
    raw: Any, vendor_model: str | None, observed_at: float, default: WindowKind
) -> QuotaWindow | None:
    if not isinstance(raw, dict):
        return None
    used = clamp_percent(raw.get("usedPercent"))
    if used is None:
        return None
    minutes = raw.get("windowDurationMins")
    minutes = minutes if is_int(minutes, 1) else None
    return QuotaWindow(
        vendor="codex",
        kind=kind_for_minutes(minutes, default),
        used_percent=used,
        resets_at=parse_reset(raw.get("resetsAt")),
        window_minutes=minutes,
        source=SOURCE_CODEX_APP_SERVER,
        observed_at=observed_at,
        model=vendor_model,
    )


def _snapshot_windows(snap: Mapping[str, Any], model: str | None, observed_at: float) -> list[QuotaWindow]:
    out = []
    for slot, default in (("primary", "session"), ("secondary", "weekly")):
        w = _codex_window(snap.get(slot), model, observed_at, default)  # type: ignore[arg-type]
        if w is not None:
            out.append(w)
    return out


def _is_account_bucket(limit_id: str, snap: Mapping[str, Any]) -> bool:
    name = snap.get("limitName") or snap.get("limitId") or limit_id
    return str(name).lower() == "codex" or str(limit_id).lower() == "codex"


def codex_windows(
    response: Mapping[str, Any], observed_at: float
) -> tuple[list[QuotaWindow], HardLimit | None, str | None]:
    """Windows, a confirmed hard limit (if the read says so) and the plan type from a rate-limit read.

    `rateLimitsByLimitId["codex"]` (else `rateLimits`) is the account; any other bucket is scoped to
    one model (`normalModelSlug`, else `limitName`, else its ID) and blocks only that model.
    """
    by_id = response.get("rateLimitsByLimitId")
    buckets: dict[str, Mapping[str, Any]] = {}
    if isinstance(by_id, dict):
        buckets = {str(k): v for k, v in by_id.items() if isinstance(v, dict)}
    account = next((v for k, v in buckets.items() if _is_account_bucket(k, v)), None)
    if account is None and isinstance(response.get("rateLimits"), dict):
        account = response["rateLimits"]
    windows: list[QuotaWindow] = []
    hard: HardLimit | None = None
    plan_type = None
    if account is not None:
        windows += _snapshot_windows(account, None, observed_at)
        plan_type = account.get("planType") if isinstance(account.get("planType"), str) else None
        credits = account.get("credits")
        if (
            isinstance(credits, dict)
            and credits.get("unlimited") is False
            and credits.get("hasCredits") is False
        ):
            windows.append(
                QuotaWindow(
                    "codex", "credits", None, None, None, SOURCE_CODEX_APP_SERVER, observed_at, status="empty"
                )
            )
        reached = account.get("rateLimitReachedType")
        allowed = response.get("ordinaryUsageAllowed")
        full = [w for w in windows if w.model is None and w.exhausted]
        if reached or allowed is False or (full and allowed is not True):
            resets = [w.resets_at for w in full if w.resets_at] or [
                w.resets_at for w in windows if w.resets_at
            ]
            why = (
                str(reached)
                if reached
                else "ordinary usage not allowed"
                if allowed is False
                else "window at 100 %"
            )
            hard = HardLimit(
                "codex", True, SOURCE_CODEX_APP_SERVER, observed_at, max(resets) if resets else None, why
            )
    for key, snap in buckets.items():
        if snap is account:
            continue
        model = snap.get("normalModelSlug") or snap.get("limitName") or key
        windows += _snapshot_windows(snap, str(model)[:128], observed_at)
    return windows, hard, plan_type


# --- Claude: statusline payload and `rate_limit_event` ---


def claude_statusline_windows(payload: Mapping[str, Any], observed_at: float) -> list[QuotaWindow]:
    """Windows from a statusline payload's `rate_limits` (absent before the first response: none)."""
    limits = payload.get("rate_limits")
    if not isinstance(limits, dict):
        return []
    out = []
    slots: tuple[tuple[str, WindowKind, int], ...] = (
        ("five_hour", "session", 300),
        ("seven_day", "weekly", 10080),
    )
    for name, kind, minutes in slots:
        raw = limits.get(name)
        if not isinstance(raw, dict):
            continue
        used = clamp_percent(raw.get("used_percentage"))
        if used is None:
            continue
        out.append(
            QuotaWindow(
                "claude",
                kind,
                used,
                parse_reset(raw.get("resets_at")),
                minutes,
                SOURCE_CLAUDE_STATUSLINE,
                observed_at,
            )
        )
    return out


def claude_event_window(info: Mapping[str, Any], observed_at: float) -> QuotaWindow | None:
    """The window a `rate_limit_event`'s `rate_limit_info` describes (utilization 0-1 or 0-100)."""
    limit_type = info.get("rateLimitType")
    status = info.get("status")
    if not isinstance(status, str):
        return None
    kind, model = CLAUDE_LIMIT_TYPES.get(str(limit_type), ("session", None))
    minutes = {"session": 300, "weekly": 10080}.get(kind)
    utilization = info.get("utilization")
    used = None
    if isinstance(utilization, int | float) and not isinstance(utilization, bool):
        used = clamp_percent(utilization * 100 if utilization <= 1.0 else utilization)
    if used is None and status == "rejected":
        used = None  # rejected says "blocked" by itself; the percentage stays unknown
    return QuotaWindow(
        "claude",
        kind,
        used,
        parse_reset(info.get("resetsAt")),
        minutes,
        SOURCE_CLAUDE_EVENT,
        observed_at,
        model=model,
        status=status[:32],
    )


def claude_event_hard_limit(info: Mapping[str, Any], observed_at: float) -> HardLimit | None:
    """A `rejected` account-level event is a confirmed hard limit; model-scoped ones are not."""
    if info.get("status") != "rejected":
        return None
    _, model = CLAUDE_LIMIT_TYPES.get(str(info.get("rateLimitType")), ("session", None))
    if model is not None:
        return None
    return HardLimit(
        "claude",
        True,
        SOURCE_CLAUDE_EVENT,
        observed_at,
        parse_reset(info.get("resetsAt")),
        f"rate_limit_event rejected ({str(info.get('rateLimitType'))[:32]})",
    )


def merge_windows(old: Iterable[QuotaWindow], new: Iterable[QuotaWindow]) -> tuple[QuotaWindow, ...]:
    """Newer observations replace older ones of the same key; unrelated windows are kept."""
    merged: dict[str, QuotaWindow] = {w.key: w for w in old}
    for w in new:
        prev = merged.get(w.key)
        if prev is None or w.observed_at >= prev.observed_at:
            merged[w.key] = w
    return tuple(sorted(merged.values(), key=lambda w: w.key))


@dataclass(frozen=True)
class QuotaView:
    """Every vendor's quota at one moment (what `ivoai quota` prints and the scheduler reads)."""

    vendors: Mapping[str, VendorQuota] = field(default_factory=dict)
    ttl_seconds: float = 45.0
    now: float = 0.0

    def get(self, vendor: str) -> VendorQuota:
        """The vendor's quota (an unknown one when never observed)."""
        return self.vendors.get(vendor) or VendorQuota(vendor)

    def with_vendor(self, quota: VendorQuota) -> QuotaView:
        """A copy with one vendor replaced."""
        return replace(self, vendors={**self.vendors, quota.vendor: quota})
