"""Session records: one private JSON file per launch below `$XDG_STATE_HOME/ivoai/sessions`.

A record holds lifecycle metadata only (seed 002, "Session control plane"): random ID, PIDs with
their kernel start markers, requested and effective compression provider, bypass reason, knowledge
sources by ID and the last bounded compression result. Never prompts, client arguments, results,
tokens or environment. Each write is an atomic private replacement (`publish.publish_record`); the
only writer of a record is the ivoai process that launched the session.

`SessionRecord` is the one declaration of the record's shape: the launcher builds its record from it
right after its client starts, so this module imports only `dataclasses` at load time; the store's
json, pathlib and fsio are imported by the methods that read (`SessionStore` is never used there).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field, fields

from ivoai import __version__
from ivoai.client.sessions.errors import InvalidSessionIdError, SessionNotFoundError, SessionRecordError
from ivoai.client.sessions.ids import SESSION_ID_PREFIX, check_session_id, new_session_id
from ivoai.client.sessions.procinfo import is_same_process
from ivoai.client.sessions.publish import publish_record
from ivoai.common.limits import SESSION_ENDED_KEEP, SESSION_RECORD_MAX_BYTES, SESSIONS_LIST_MAX

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from ivoai.common.paths import XdgPaths

__all__ = [
    "RECORD_SCHEMA",
    "SESSION_ID_PREFIX",
    "SessionRecord",
    "SessionStore",
    "check_session_id",
    "new_session_id",
    "now",
]

RECORD_SCHEMA = 1


@dataclass
class SessionRecord:
    """The persisted metadata of one launched session."""

    id: str
    executor: str
    pid: int
    pid_start: str | None
    started_at: float
    requested_provider: str
    effective_provider: str
    provider_source: str
    state: str = "running"  # "running" | "ended"
    client_pid: int | None = None
    client_start: str | None = None
    helper_pid: int | None = None  # the session's compression proxy (own process group), if any
    helper_start: str | None = None
    bypass: bool = False
    bypass_reason: str | None = None
    fallback: bool = False
    authoritative_sources: int = 0
    knowledge_sources: list[str] = field(default_factory=list)
    ended_at: float | None = None
    exit_code: int | None = None
    end_reason: str | None = None
    last_compression: dict[str, Any] | None = None
    client_origin: str | None = None  # "managed" (ivoai's pinned install) or "path"
    auto: dict[str, Any] | None = None  # `ivoai auto`: gate and plan metadata (orchestration._auto)
    ivoai_version: str = __version__
    schema: int = RECORD_SCHEMA

    def to_json(self) -> dict[str, Any]:
        """The record as stored."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: object, where: str) -> SessionRecord:
        """Parse a stored record; unknown keys are ignored, missing required keys are an error.

        Raises:
            SessionRecordError: the document is not a valid record.
        """
        if not isinstance(data, dict):
            raise SessionRecordError(f"{where}: not a JSON object")
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        try:
            record = cls(**kwargs)
        except TypeError as exc:
            raise SessionRecordError(f"{where}: {exc}") from None
        check_session_id(record.id)
        if not isinstance(record.pid, int) or not isinstance(record.started_at, int | float):
            raise SessionRecordError(f"{where}: `pid` and `started_at` must be numbers")
        return record

    def status(self) -> str:
        """`live` (its ivoai process is still the recorded one), `ended`, or `lost` (it died unrecorded)."""
        if self.state == "ended":
            return "ended"
        return "live" if is_same_process(self.pid, self.pid_start) else "lost"

    def view(self) -> dict[str, Any]:
        """The record plus its computed status, for `session show --json` and monitor."""
        out = self.to_json()
        out["status"] = self.status()
        return out


class SessionStore:
    """The directory of session records."""

    def __init__(self, paths: XdgPaths | None = None) -> None:
        from ivoai.common.paths import xdg_paths

        self.paths = paths or xdg_paths()
        self.root = self.paths.state
        self.dir = self.paths.sessions_dir

    def path_for(self, session_id: str) -> Path:
        """The record file of a (validated) session ID."""
        return self.dir / f"{check_session_id(session_id)}.json"

    def write(self, record: SessionRecord) -> None:
        """Publish `record` atomically (private 0600 file in a 0700 directory; see `publish`)."""
        check_session_id(record.id)
        publish_record(str(self.root), record.to_json())

    def load(self, session_id: str) -> SessionRecord:
        """Read one record.

        Raises:
            InvalidSessionIdError, SessionNotFoundError, SessionRecordError.
        """
        import json

        from ivoai.common.fsio import read_private_file_or_none

        path = self.path_for(session_id)
        raw = read_private_file_or_none(self.root, path, SESSION_RECORD_MAX_BYTES)
        if raw is None:
            raise SessionNotFoundError(f"no session {session_id} (see `ivoai session list`)")
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SessionRecordError(f"{path}: invalid JSON ({exc.__class__.__name__})") from None
        return SessionRecord.from_json(data, str(path))

    def ids(self) -> list[str]:
        """IDs of stored records, newest file first (bounded by SESSIONS_LIST_MAX)."""
        from ivoai.common.fsio import ensure_private_dir

        try:
            ensure_private_dir(self.root, self.dir)
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return []
        found: list[tuple[float, str]] = []
        for entry in entries:
            name = entry.name
            if not name.endswith(".json") or name.startswith("."):
                continue
            sid = name[: -len(".json")]
            try:
                check_session_id(sid)
                mtime = entry.stat(follow_symlinks=False).st_mtime
            except (InvalidSessionIdError, OSError):
                continue
            found.append((mtime, sid))
        found.sort(reverse=True)
        return [sid for _, sid in found[:SESSIONS_LIST_MAX]]

    def list(self) -> tuple[list[SessionRecord], list[str]]:
        """(records newest first, problems): a malformed record is reported, never deleted."""
        records: list[SessionRecord] = []
        problems: list[str] = []
        for sid in self.ids():
            try:
                records.append(self.load(sid))
            except (SessionRecordError, SessionNotFoundError) as exc:
                problems.append(exc.message)
        records.sort(key=lambda r: r.started_at, reverse=True)
        return records, problems

    def prune_ended(self, keep: int = SESSION_ENDED_KEEP) -> int:
        """Delete the oldest ended records beyond `keep`; live and lost ones are kept. Returns the count."""
        records, _ = self.list()
        ended = [r for r in records if r.state == "ended"]
        removed = 0
        for record in ended[keep:]:
            try:
                os.unlink(self.path_for(record.id))
                removed += 1
            except FileNotFoundError:
                pass
        return removed


def now() -> float:
    """Wall-clock seconds (records show when a session started and ended)."""
    return time.time()
