"""Compression telemetry: bounded, content-free events appended to a rotating private NDJSON file.

Schema (seed 003, "Telemetria segura"): only bounded dimensions, each validated against a closed
set or a numeric range: executor, provider (requested/effective), payload type, fidelity class,
bytes and estimated tokens before/after, ratio, latency, recovery count, result, bypass, fallback,
reason code. Tokens are always estimates (`tokens_estimated: true`). Never prompts, responses,
code, diffs, paths, environment, cookies or headers: the schema has no field that could hold them.

The file is `$XDG_STATE_HOME/ivoai/telemetry/compression.ndjson` (0600 in 0700), rotated beyond
TELEMETRY_FILE_MAX_BYTES keeping TELEMETRY_ROTATIONS_KEPT generations. Writing never raises:
a telemetry failure never blocks a launch (`record` returns False instead).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ivoai.common.fsio import ensure_private_dir, file_lock, open_private_file
from ivoai.common.limits import TELEMETRY_EVENT_MAX_BYTES, TELEMETRY_FILE_MAX_BYTES, TELEMETRY_ROTATIONS_KEPT
from ivoai.common.paths import XdgPaths, xdg_paths

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
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _INT_MAX:
            event[key] = value
    before, after = event.get("bytes_before"), event.get("bytes_after")
    if isinstance(before, int) and isinstance(after, int) and before > 0:
        event["ratio"] = round(after / before, 4)
    session = fields.get("session_id")
    if isinstance(session, str) and session.startswith("ses_") and len(session) == 36:
        event["session_id"] = session
    return event


class Telemetry:
    """Appends events to the rotating private NDJSON file."""

    def __init__(self, paths: XdgPaths | None = None) -> None:
        self.paths = paths or xdg_paths()
        self.dir = self.paths.state / "telemetry"
        self.file = self.dir / "compression.ndjson"
        self.lock = self.dir / "compression.lock"

    def record(self, **fields: Any) -> bool:
        """Append one event; False (never an exception) when it could not be written."""
        try:
            line = (json.dumps(build_event(**fields), sort_keys=True) + "\n").encode("utf-8")
            if len(line) > TELEMETRY_EVENT_MAX_BYTES:
                return False
            ensure_private_dir(self.paths.state, self.dir)
            with file_lock(self.paths.state, self.lock, timeout=1.0):
                self._rotate_if_needed(len(line))
                fd = os.open(
                    self.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
                )
                try:
                    os.fchmod(fd, 0o600)
                    os.write(fd, line)
                finally:
                    os.close(fd)
            return True
        except Exception:  # noqa: BLE001 - telemetry must never block or break a launch
            return False

    def _rotate_if_needed(self, incoming: int) -> None:
        try:
            size = os.stat(self.file, follow_symlinks=False).st_size
        except FileNotFoundError:
            return
        if size + incoming <= TELEMETRY_FILE_MAX_BYTES:
            return
        for gen in range(TELEMETRY_ROTATIONS_KEPT, 0, -1):
            src = self.file if gen == 1 else self.file.with_name(f"{self.file.name}.{gen - 1}")
            dst = self.file.with_name(f"{self.file.name}.{gen}")
            try:
                os.replace(src, dst)
            except FileNotFoundError:
                continue

    def events(self) -> Iterator[dict[str, Any]]:
        """Events of the current file, oldest first (malformed lines skipped)."""
        try:
            fd = open_private_file(self.paths.state, self.file)
        except (FileNotFoundError, OSError):
            return
        with os.fdopen(fd, "rb") as fh:
            for raw in fh:
                try:
                    event = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    yield event

    def last_by_session(self) -> Mapping[str, dict[str, Any]]:
        """The newest event of each session in the current file."""
        out: dict[str, dict[str, Any]] = {}
        for event in self.events():
            sid = event.get("session_id")
            if isinstance(sid, str):
                out[sid] = event
        return out

    @property
    def path(self) -> Path:
        return self.file
