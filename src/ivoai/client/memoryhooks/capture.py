"""Host payload -> hook event for the memory service (import-light: `os`, `json`, `time`).

Codex and Claude Code send the same JSON shape on a hook's stdin (`session_id`, `cwd`,
`hook_event_name`, and per event `prompt`, `tool_name`/`tool_input`, `last_assistant_message`,
`source`, `reason`, `trigger`). The event keeps only what the server's hook intake accepts
(`ivoai.server.memory.hooks.HookEvent`): never the tool's output or the transcript.

Every text is sanitized (control characters other than tab/newline removed, lone surrogates replaced),
bounded (prompt/message at `MEMORY_HOOK_TEXT_MAX_CHARS` with the server's `…[truncated]` marker,
paths at 1,024 characters, at most 50 files, the whole event under `MEMORY_HOOK_EVENT_MAX_BYTES`) and
redacted with ivoai's redactor before it is spooled, so the spool never holds a recognised credential.
"""

from __future__ import annotations

import json
import os
import time

from ivoai.common.limits import (
    MEMORY_HOOK_EVENT_MAX_BYTES,
    MEMORY_HOOK_FILES_MAX,
    MEMORY_HOOK_TEXT_MAX_CHARS,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# Host hook event names (Codex and Claude Code share them) -> the memory service's event kinds.
EVENT_KINDS = {
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_prompt",
    "PostToolUse": "tool_use",
    "Stop": "stop",
    "SubagentStop": "subagent_stop",
    "PreCompact": "pre_compact",
    "Notification": "notification",
    "SessionEnd": "session_end",
}
KINDS = frozenset(EVENT_KINDS.values())
AGENTS = ("codex", "claude")
TRUNCATED = " …[truncated]"  # the server's marker (ivoai.server.memory.hooks.TRUNCATED)
PATH_MAX_CHARS = 1024
TOOL_NAME_MAX_CHARS = 128
SESSION_ID_MAX_CHARS = 128
RECORD_VERSION = 1

# C0 controls except tab and newline, DEL, and the C1 block; removed from every text.
_CONTROLS = {c: None for c in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F, *range(0x80, 0xA0)]}
_CONTROLS[0x0D] = None


def kind_of(name: str) -> str | None:
    """The event kind for a host event name (`PostToolUse`) or a kind (`tool_use`); None if unknown."""
    if name in EVENT_KINDS:
        return EVENT_KINDS[name]
    return name if name in KINDS else None


def clean_text(value: object, limit: int) -> str | None:
    """A sanitized, bounded string (None for non-strings and empty results)."""
    if not isinstance(value, str):
        return None
    text = value.translate(_CONTROLS)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from a `\\ud800` escape
        text = text.encode("utf-8", "replace").decode("utf-8")
    text = text.strip()
    if not text:
        return None
    if len(text) > limit:
        text = text[: limit - len(TRUNCATED)] + TRUNCATED
    return text


def session_id_of(value: object, fallback: str) -> str:
    """A session ID the server accepts (`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`), else `fallback`."""
    if isinstance(value, str):
        kept = "".join(c if (c.isascii() and (c.isalnum() or c in "._-")) else "-" for c in value)
        kept = kept.lstrip("._-")[:SESSION_ID_MAX_CHARS]
        if kept:
            return kept
    return fallback


def _patch_files(patch: str) -> list[str]:
    """Files named by a Codex `apply_patch` envelope (`*** Update File: path`, Add, Delete, Move to)."""
    out = []
    for line in patch.splitlines():
        for marker in ("*** Update File: ", "*** Add File: ", "*** Delete File: ", "*** Move to: "):
            if line.startswith(marker):
                out.append(line[len(marker) :].strip())
    return out


def files_of(tool_input: object) -> list[str]:
    """Paths a tool call touched, from the usual argument names (Edit/Write/Read/NotebookEdit/apply_patch)."""
    if not isinstance(tool_input, dict):
        return []
    found: list[str] = []
    for key in ("file_path", "path", "notebook_path"):
        value = tool_input.get(key)
        if isinstance(value, str):
            found.append(value)
    paths = tool_input.get("paths")
    if isinstance(paths, list):
        found.extend(p for p in paths if isinstance(p, str))
    for key in ("command", "input", "patch"):
        value = tool_input.get(key)
        if isinstance(value, str) and "*** Begin Patch" in value[:4096]:
            found.extend(_patch_files(value))
    return found


def _relative(path: str, root: str | None) -> str:
    if root and os.path.isabs(path):
        try:
            rel = os.path.relpath(path, root)
        except ValueError:
            return path
        if not rel.startswith(".."):
            return rel
    return path


def salvage(text: str, keys: tuple[str, ...]) -> dict[str, str]:
    """String fields readable from the start of a JSON object that was cut off (an oversized payload)."""
    from json.decoder import scanstring  # type: ignore[attr-defined]

    out: dict[str, str] = {}
    for key in keys:
        needle = json.dumps(key)
        at = text.find(needle)
        while at >= 0:
            i = at + len(needle)
            while i < len(text) and text[i] in " \t\r\n":
                i += 1
            if i < len(text) and text[i] == ":":
                i += 1
                while i < len(text) and text[i] in " \t\r\n":
                    i += 1
                if i < len(text) and text[i] == '"':
                    try:
                        out[key] = scanstring(text, i + 1, False)[0]
                    except ValueError:  # the value itself was cut: keep what is there
                        out[key] = text[i + 1 :]
                    break
            at = text.find(needle, at + 1)
    return out


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1e6):06d}Z"


def build_event(
    kind: str,
    agent: str,
    payload: Mapping[str, Any],
    *,
    env: Mapping[str, str],
    note: str | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The hook event (unredacted; `redact_event` runs next) for one host payload."""
    from ivoai.client.memoryhooks.project import discover

    cwd = payload.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = ""
    common, root = discover(cwd) if cwd else (None, None)
    fallback = session_id_of(env.get("IVOAI_SESSION_ID"), "unknown")
    event: dict[str, Any] = {
        "idempotency_key": "h" + os.urandom(16).hex(),
        "event": kind,
        "session_id": session_id_of(payload.get("session_id"), fallback),
        "agent": agent,
        "at": _iso(time.time() if now is None else now),
    }
    path_fields = {"cwd": cwd, "git_common_dir": common, "repo_root": root}
    for name, value in path_fields.items():
        text = clean_text(value, PATH_MAX_CHARS)
        if text:
            event[name] = text
    prompt = payload.get("prompt") if kind == "user_prompt" else None
    message = _message_of(kind, payload)
    if note:
        message = note + (f" {message}" if message else "")
    for name, value in (("prompt", prompt), ("message", message)):
        text = clean_text(value, MEMORY_HOOK_TEXT_MAX_CHARS)
        if text:
            event[name] = text
    if kind == "tool_use":
        tool = clean_text(payload.get("tool_name"), TOOL_NAME_MAX_CHARS)
        if tool:
            event["tool_name"] = tool
        files: list[str] = []
        for raw in files_of(payload.get("tool_input")):
            text = clean_text(_relative(raw, root), PATH_MAX_CHARS)
            if text and text not in files:
                files.append(text)
        if files:
            event["files"] = files[:MEMORY_HOOK_FILES_MAX]
    return event


def _message_of(kind: str, payload: Mapping[str, Any]) -> str | None:
    if kind in ("stop", "subagent_stop"):
        value = payload.get("last_assistant_message")
    elif kind == "notification":
        value = payload.get("message")
    elif kind == "session_start":
        value = f"source: {payload['source']}" if isinstance(payload.get("source"), str) else None
    elif kind == "session_end":
        value = f"reason: {payload['reason']}" if isinstance(payload.get("reason"), str) else None
    elif kind == "pre_compact":
        trigger = payload.get("trigger")
        value = f"compaction ({trigger})" if isinstance(trigger, str) else "compaction"
    else:
        value = None
    return value if isinstance(value, str) else None


def redact_event(event: dict[str, Any]) -> dict[str, Any]:
    """Replace every recognised credential in the event's texts (ivoai's redactor)."""
    from ivoai.common.redact import redact

    for name in ("prompt", "message", "tool_name", "cwd", "git_common_dir", "repo_root"):
        value = event.get(name)
        if isinstance(value, str):
            event[name] = redact(value)
    if "files" in event:
        event["files"] = [redact(f) for f in event["files"]]
    return event


def encode_record(event: dict[str, Any], dest: str | None) -> bytes:
    """One spool line: `{"v": 1, "dest": …, "event": …}\\n`, the event trimmed to the server's size bound."""
    record = {"v": RECORD_VERSION, "dest": dest, "event": event}
    data = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    budget = MEMORY_HOOK_EVENT_MAX_BYTES - 1024  # the record envelope and JSON escapes on the wire
    for _ in range(64):  # each round halves something; a handful always suffices
        if len(data) <= budget:
            break
        if event.get("files"):
            event["files"] = event["files"][: len(event["files"]) // 2]
            if not event["files"]:
                del event["files"]
        elif event.get("message") and len(event["message"]) > 64:
            event["message"] = event["message"][: len(event["message"]) // 2] + TRUNCATED
        elif event.get("prompt") and len(event["prompt"]) > 64:
            event["prompt"] = event["prompt"][: len(event["prompt"]) // 2] + TRUNCATED
        else:
            for name in ("cwd", "repo_root", "git_common_dir"):
                event.pop(name, None)
        record["event"] = event
        data = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return data + b"\n"
