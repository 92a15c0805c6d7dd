"""Compression telemetry: bounded, content-free events appended to a rotating private NDJSON file.

The schema is `_events.build_event` (seed 003, "Telemetria segura"): executor, provider
(requested/effective), payload type, fidelity class, bytes and estimated tokens before/after, ratio,
latency, recovery count, result, bypass, fallback and a reason code. Never prompts, responses, code,
diffs, paths, environment, cookies or headers.

The file is `$XDG_STATE_HOME/ivoai/telemetry/compression.ndjson` (0600 in 0700), rotated beyond
TELEMETRY_FILE_MAX_BYTES keeping TELEMETRY_ROTATIONS_KEPT generations, appended under an flock.
Writing never raises: a telemetry failure never blocks a launch (`record` returns False instead).
"""

from __future__ import annotations

import os

from ivoai.client.compression._events import build_event, estimate_tokens
from ivoai.common.lightio import append_rotating, json_dumps, open_private_dirs
from ivoai.common.limits import TELEMETRY_EVENT_MAX_BYTES, TELEMETRY_FILE_MAX_BYTES, TELEMETRY_ROTATIONS_KEPT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

__all__ = ["Telemetry", "build_event", "estimate_tokens"]

TELEMETRY_DIR = "telemetry"
TELEMETRY_FILE = "compression.ndjson"


def _state_root() -> str:
    from ivoai.common.lightio import xdg_root

    return xdg_root("XDG_STATE_HOME", ".local/state")


class Telemetry:
    """Appends events to the rotating private NDJSON file below ivoai's state root."""

    def __init__(self, state_root: str | os.PathLike[str] | None = None) -> None:
        self.root = os.fspath(state_root) if state_root is not None else _state_root()
        self.path = os.path.join(self.root, TELEMETRY_DIR, TELEMETRY_FILE)

    def record(self, **fields: Any) -> bool:
        """Append one event; False (never an exception) when it could not be written."""
        try:
            line = (json_dumps(build_event(**fields)) + "\n").encode("utf-8")
            if len(line) > TELEMETRY_EVENT_MAX_BYTES:
                return False
            fd = open_private_dirs(self.root, TELEMETRY_DIR)
            try:
                append_rotating(
                    fd,
                    TELEMETRY_FILE,
                    line,
                    max_bytes=TELEMETRY_FILE_MAX_BYTES,
                    keep=TELEMETRY_ROTATIONS_KEPT,
                )
            finally:
                os.close(fd)
            return True
        except Exception:  # noqa: BLE001 - telemetry must never block or break a launch
            return False

    def events(self) -> Iterator[dict[str, Any]]:
        """Events of the current file, oldest first (malformed lines skipped; nothing when unreadable)."""
        import json

        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
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
