"""The bounded compression-event schema (seed 003, "Telemetria segura"); pure and import-light.

Each field is validated against a closed set or a numeric range; anything else is dropped or
replaced by `other`. There is no field that could carry a prompt, response, code, diff, path,
environment, cookie or header. Token counts are always estimates (`tokens_estimated: true`).
"""

from __future__ import annotations

import time

from ivoai.client.sessions.ids import is_session_id
from ivoai.common.validate import is_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EVENT_SCHEMA = "ivoai.compression.event.v1"
EXECUTORS = frozenset({"codex", "claude", "opencode"})
PROVIDERS = frozenset({"caveman", "headroom", "direct"})
FIDELITY = frozenset({"compressible", "exact_required", "bypass", "unsupported"})
RESULTS = frozenset({"started", "ok", "bypassed", "fallback", "failed", "ended"})
_REASON_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
_INT_FIELDS = (
    "bytes_before",
    "bytes_after",
    "tokens_before",
    "tokens_after",
    "latency_ms",
    "recovery_count",
    "authoritative_sources",
)
_INT_MAX = 1 << 53


def estimate_tokens(nbytes: int) -> int:
    """A rough token estimate (~4 bytes per token); always labelled as an estimate."""
    return (max(0, nbytes) + 3) // 4


def _reason(value: object) -> str | None:
    if value is None:
        return None
    text = str(value)[:64]
    return text if text and set(text) <= _REASON_CHARS else "other"


def build_event(**fields: Any) -> dict[str, Any]:
    """A validated event: unknown fields dropped, values outside their closed set replaced by `other`."""
    event: dict[str, Any] = {"schema": EVENT_SCHEMA, "ts": round(time.time(), 3), "tokens_estimated": True}
    for key, allowed in (
        ("executor", EXECUTORS),
        ("requested", PROVIDERS),
        ("effective", PROVIDERS),
        ("provider", PROVIDERS),
        ("fidelity", FIDELITY),
        ("result", RESULTS),
    ):
        if key in fields and fields[key] is not None:
            event[key] = fields[key] if fields[key] in allowed else "other"
    if "payload_type" in fields:
        event["payload_type"] = _reason(fields["payload_type"])
    for key in ("reason",):
        if key in fields:
            event[key] = _reason(fields[key])
    for key in ("bypass", "fallback"):
        if key in fields:
            event[key] = bool(fields[key])
    for key in _INT_FIELDS:
        value = fields.get(key)
        if is_int(value, 0, _INT_MAX - 1):
            event[key] = value
    before, after = event.get("bytes_before"), event.get("bytes_after")
    if isinstance(before, int) and isinstance(after, int) and before > 0:
        event["ratio"] = round(after / before, 4)
    session = fields.get("session_id")
    if is_session_id(session):
        event["session_id"] = session
    return event
