"""A session's plan metadata: `$XDG_STATE_HOME/ivoai/auto/<session-id>.json` (0600, atomic).

Written only by the session's orchestrator (the MCP server process), read by `ivoai monitor` while
the session lives, and merged into the session record by the launcher when the primary exits.
Metadata only (seed 002, "Session control plane"): task IDs, dependencies, scores, tiers,
delegation, profiles, state, durations, escalation reasons, worker states and run metrics;
never task text, briefs, worker output, credentials or environments. Issue 16 (resume, recover,
handoff) reads the same document.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ivoai.client.sessions.records import check_session_id
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import atomic_write, read_private_file_or_none
from ivoai.common.limits import AUTO_STATE_MAX_BYTES
from ivoai.common.paths import XdgPaths, xdg_paths

AUTO_STATE_SCHEMA = 1
AUTO_DIR = "auto"


def state_path(session_id: str, paths: XdgPaths | None = None) -> Path:
    """Where a session's plan metadata lives (the ID is validated before any path is built)."""
    paths = paths or xdg_paths()
    return paths.state / AUTO_DIR / f"{check_session_id(session_id)}.json"


def write_state(session_id: str, doc: dict[str, Any], paths: XdgPaths | None = None) -> None:
    """Publish the metadata document atomically (private file, private directory)."""
    paths = paths or xdg_paths()
    data = (json.dumps({**doc, "schema": AUTO_STATE_SCHEMA}, sort_keys=True, indent=1) + "\n").encode("utf-8")
    if len(data) > AUTO_STATE_MAX_BYTES:
        raise IvoaiError(f"plan metadata exceeds {AUTO_STATE_MAX_BYTES} bytes", code="auto_state_too_large")
    atomic_write(paths.state, state_path(session_id, paths), data)


def read_state(session_id: str, paths: XdgPaths | None = None) -> dict[str, Any] | None:
    """The metadata document, or None when there is none (or it is unreadable)."""
    paths = paths or xdg_paths()
    return read_json_doc(paths.state, state_path(session_id, paths), AUTO_STATE_MAX_BYTES)


def read_json_doc(root: Path, path: Path, max_bytes: int) -> dict[str, Any] | None:
    """The JSON object in the private file `path` below `root`; None when missing, unreadable or not one."""
    try:
        raw = read_private_file_or_none(root, path, max_bytes)
        doc = json.loads(raw) if raw else None
    except (IvoaiError, OSError, ValueError):  # ValueError: not UTF-8 or not JSON
        return None
    return doc if isinstance(doc, dict) else None
