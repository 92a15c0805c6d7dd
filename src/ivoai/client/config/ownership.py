"""The ownership manifest `$XDG_STATE_HOME/ivoai/ownership.json`: what ivoai owns, and what it must not touch.

Besides the `entries` below, the `integrations` section (see the end of this module) records the
exact text edits the memory hooks made to third-party config files (`docs/hooks.md`).

Every subsystem that puts something outside ivoai's own files records it here, and uninstall removes
exactly the recorded things (never anything found by a name pattern). Entry kinds:

* `executable` / `directory`: a component path. `managed` ones live below ivoai's XDG data root and
  uninstall removes them; `pre_existing` ones (a `codex` already on PATH) belonged to the user before
  ivoai ran and are never replaced, moved or deleted. An entry never changes ownership.
* `file`: a whole file ivoai created outside its roots (a hook script); removed only while its
  SHA-256 still equals `sha256` (what ivoai wrote).
* `config_entry`: one value ivoai wrote into a third-party config file (`~/.codex/config.toml`,
  `~/.claude/settings.json`). `format` is `toml` or `json`; `pointer` is the list of keys from the
  document root to the value; `mode` `key` removes the key at `pointer` while its value still hashes
  to `value_sha256`; `mode` `element` removes from the array at `pointer` the one element that hashes
  to `value_sha256`. A value the user changed since is left in place and reported.

`owner` names the subsystem that recorded the entry (`components`, `hooks`, ...); `component` the
thing it belongs to. File format (schema 2; schema-1 files, which only had component paths, are read
as `executable` entries owned by `components`)::

    {"schema": 2, "entries": [
      {"component": "codex", "owner": "components", "kind": "executable", "path": "/abs/path",
       "ownership": "managed", "recorded_at": "2026-...Z"},
      {"component": "memory-hooks", "owner": "hooks", "kind": "config_entry",
       "path": "/home/u/.claude/settings.json", "ownership": "managed", "format": "json",
       "pointer": ["hooks", "SessionStart"], "mode": "element", "value_sha256": "…",
       "recorded_at": "…"}]}

`value_sha256` is `canonical_digest(value)`: SHA-256 of the value as compact, key-sorted JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from ivoai.client.config.errors import OwnershipConflictError, OwnershipError
from ivoai.client.config.schema import check_file_schema
from ivoai.common.fsio import atomic_write, file_lock, read_private_file_or_none, remove_stale_staging
from ivoai.common.jsonio import dumps_bytes
from ivoai.common.limits import JSON_STATE_MAX_BYTES, OWNERSHIP_MAX_ENTRIES
from ivoai.common.paths import XdgPaths

OWNERSHIP_SCHEMA_VERSION = 2
COMPONENT_PATTERN = re.compile(r"[a-z][a-z0-9._-]{0,63}")
OWNER_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,31}")
ENTRY_KINDS = ("executable", "directory", "file", "config_entry")
CONFIG_FORMATS = ("toml", "json")
ENTRY_MODES = ("key", "element")
POINTER_MAX_DEPTH = 16


class Ownership(StrEnum):
    """Who owns a component path."""

    MANAGED = "managed"
    PRE_EXISTING = "pre_existing"


@dataclass(frozen=True)
class OwnershipEntry:
    """One recorded thing ivoai owns (or knows it must leave alone)."""

    component: str
    path: str
    ownership: Ownership
    recorded_at: str
    kind: str = "executable"
    owner: str = "components"
    sha256: str | None = None  # kind `file`
    format: str | None = None  # kind `config_entry`
    pointer: tuple[str, ...] = ()
    mode: str | None = None
    value_sha256: str | None = None

    def key(self) -> tuple[str, str, tuple[str, ...], str | None, str | None]:
        """Identity: a path for paths and files; path + pointer + mode + value for config entries."""
        if self.kind == "config_entry":
            return (self.kind, self.path, self.pointer, self.mode, self.value_sha256)
        return ("path", self.path, (), None, None)

    def to_json(self) -> dict[str, Any]:
        """The stored shape (optional fields only when set)."""
        out: dict[str, Any] = {
            "component": self.component,
            "owner": self.owner,
            "kind": self.kind,
            "path": self.path,
            "ownership": self.ownership.value,
            "recorded_at": self.recorded_at,
        }
        if self.kind == "file":
            out["sha256"] = self.sha256
        if self.kind == "config_entry":
            out.update(
                format=self.format, pointer=list(self.pointer), mode=self.mode, value_sha256=self.value_sha256
            )
        return out


def canonical_digest(value: Any) -> str:
    """SHA-256 of `value` as compact, key-sorted JSON (what `value_sha256` records)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def parse_entry(item: Any, schema: int) -> OwnershipEntry:
    """One stored entry (schema 1 or 2).

    Raises:
        TypeError, KeyError, ValueError: malformed (the caller names the entry).
    """
    if not isinstance(item, dict):
        raise TypeError("not an object")
    kind = str(item.get("kind", "executable")) if schema >= 2 else "executable"
    if kind not in ENTRY_KINDS:
        raise ValueError(kind)
    pointer = item.get("pointer", [])
    if not isinstance(pointer, list) or not all(isinstance(p, str) for p in pointer):
        raise ValueError("pointer")
    return OwnershipEntry(
        component=str(item["component"]),
        path=str(item["path"]),
        ownership=Ownership(item["ownership"]),
        recorded_at=str(item.get("recorded_at", "")),
        kind=kind,
        owner=str(item.get("owner", "components")) if schema >= 2 else "components",
        sha256=item.get("sha256") if isinstance(item.get("sha256"), str) else None,
        format=item.get("format") if isinstance(item.get("format"), str) else None,
        pointer=tuple(pointer),
        mode=item.get("mode") if isinstance(item.get("mode"), str) else None,
        value_sha256=item.get("value_sha256") if isinstance(item.get("value_sha256"), str) else None,
    )


class OwnershipManifest:
    """Read and update the manifest; mutations are locked and atomically published."""

    def __init__(self, paths: XdgPaths) -> None:
        self._paths = paths

    @property
    def path(self) -> Path:
        return self._paths.ownership_manifest

    def _locked(self) -> AbstractContextManager[None]:
        return file_lock(self._paths.state, self._paths.state / ".ownership.json.lock")

    def _document(self) -> dict[str, Any] | None:
        """The manifest's top-level object; None when there is no manifest yet."""
        raw = read_private_file_or_none(self._paths.state, self.path, JSON_STATE_MAX_BYTES)
        if raw is None:
            return None
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise OwnershipError(f"{self.path} is not valid JSON; restore it or delete it") from None
        if not isinstance(doc, dict):
            raise OwnershipError(f"{self.path}: expected a JSON object")
        return doc

    def _read(self) -> list[OwnershipEntry]:
        doc = self._document()
        if doc is None:
            return []
        schema = check_file_schema(self.path, doc.get("schema"), OWNERSHIP_SCHEMA_VERSION, OwnershipError)
        items = doc.get("entries")
        if not isinstance(items, list):
            raise OwnershipError(f"{self.path}: `entries` must be a list")
        out: list[OwnershipEntry] = []
        for i, item in enumerate(items):
            try:
                out.append(parse_entry(item, schema))
            except (TypeError, KeyError, ValueError, AttributeError):
                raise OwnershipError(f"{self.path}: entry {i} is malformed") from None
        return out

    def _write(self, entries: list[OwnershipEntry], extras: dict[str, Any] | None = None) -> None:
        remove_stale_staging(self._paths.state, self.path)
        # Other top-level sections (`integrations`, below) are kept as they are.
        doc = {
            **(self._extras() if extras is None else extras),
            "schema": OWNERSHIP_SCHEMA_VERSION,
            "entries": [e.to_json() for e in entries],
        }
        atomic_write(self._paths.state, self.path, dumps_bytes(doc))

    def entries(self) -> list[OwnershipEntry]:
        """All entries, sorted by component then path."""
        return sorted(self._read(), key=lambda e: (e.component, e.path, e.pointer))

    def get(self, path: str | Path) -> OwnershipEntry | None:
        """The path entry (executable, directory or file) for an absolute path, or None."""
        wanted = os.path.abspath(path)
        return next((e for e in self._read() if e.path == wanted and e.kind != "config_entry"), None)

    def _add(self, entry: OwnershipEntry) -> OwnershipEntry:
        with self._locked():
            entries = self._read()
            for existing in entries:
                if existing.key() != entry.key():
                    continue
                if (existing.ownership, existing.component, existing.kind) == (
                    entry.ownership,
                    entry.component,
                    entry.kind,
                ):
                    return existing
                raise OwnershipConflictError(
                    f"{entry.path} is already recorded as {existing.ownership.value} {existing.kind} for "
                    f"{existing.component}; ivoai never changes who owns a path"
                )
            if len(entries) >= OWNERSHIP_MAX_ENTRIES:
                raise OwnershipError(f"the ownership manifest is full ({OWNERSHIP_MAX_ENTRIES} entries)")
            entries.append(entry)
            self._write(entries)
            return entry

    @staticmethod
    def _check_names(component: str, owner: str, path: str | Path) -> str:
        if not COMPONENT_PATTERN.fullmatch(component):
            raise OwnershipError(f"invalid component name; expected {COMPONENT_PATTERN.pattern}")
        if not OWNER_PATTERN.fullmatch(owner):
            raise OwnershipError(f"invalid owner name; expected {OWNER_PATTERN.pattern}")
        if not os.path.isabs(path):
            raise OwnershipError(f"component path must be absolute: {path}")
        return os.path.abspath(path)

    def record(
        self,
        component: str,
        path: str | Path,
        ownership: Ownership,
        *,
        kind: str = "executable",
        owner: str = "components",
    ) -> OwnershipEntry:
        """Record `path` of `component` as managed or pre-existing (idempotent).

        Raises:
            OwnershipError: invalid name, relative path, or a managed path outside the data root.
            OwnershipConflictError: the path is already recorded with another ownership or component.
        """
        abspath = self._check_names(component, owner, path)
        if kind not in ("executable", "directory"):
            raise OwnershipError(
                "record() takes executables and directories; see record_file/record_config_entry"
            )
        data_root = os.path.abspath(self._paths.data)
        if ownership is Ownership.MANAGED and os.path.commonpath([abspath, data_root]) != data_root:
            raise OwnershipError(f"a managed path must live below ivoai's data root {data_root}: {abspath}")
        return self._add(OwnershipEntry(component, abspath, ownership, _now(), kind=kind, owner=owner))

    def record_file(self, component: str, path: str | Path, *, owner: str, sha256: str) -> OwnershipEntry:
        """Record a whole file ivoai wrote outside its roots (removed on uninstall while unchanged)."""
        abspath = self._check_names(component, owner, path)
        if not re.fullmatch(r"[0-9a-f]{64}", sha256):
            raise OwnershipError("`sha256` must be 64 lowercase hex digits")
        return self._add(
            OwnershipEntry(
                component, abspath, Ownership.MANAGED, _now(), kind="file", owner=owner, sha256=sha256
            )
        )

    def record_config_entry(
        self,
        component: str,
        path: str | Path,
        *,
        owner: str,
        format: str,
        pointer: list[str] | tuple[str, ...],
        value: Any,
        mode: str = "key",
    ) -> OwnershipEntry:
        """Record one value ivoai wrote into a third-party config file (see the module docstring).

        Raises:
            OwnershipError: unknown format or mode, or an empty/too deep pointer.
        """
        abspath = self._check_names(component, owner, path)
        if format not in CONFIG_FORMATS or mode not in ENTRY_MODES:
            raise OwnershipError(f"format must be one of {CONFIG_FORMATS} and mode one of {ENTRY_MODES}")
        if (
            not pointer
            or len(pointer) > POINTER_MAX_DEPTH
            or not all(isinstance(p, str) and p for p in pointer)
        ):
            raise OwnershipError(f"pointer must be 1..{POINTER_MAX_DEPTH} non-empty keys")
        return self._add(
            OwnershipEntry(
                component,
                abspath,
                Ownership.MANAGED,
                _now(),
                kind="config_entry",
                owner=owner,
                format=format,
                pointer=tuple(pointer),
                mode=mode,
                value_sha256=canonical_digest(value),
            )
        )

    def forget(self, path: str | Path) -> bool:
        """Remove the path entry for `path` (after its managed file was removed); True if it existed."""
        wanted = os.path.abspath(path)
        with self._locked():
            entries = self._read()
            kept = [e for e in entries if not (e.path == wanted and e.kind != "config_entry")]
            if len(kept) == len(entries):
                return False
            self._write(kept)
            return True

    def forget_entry(self, entry: OwnershipEntry) -> bool:
        """Remove exactly `entry` (any kind); True if it existed."""
        with self._locked():
            entries = self._read()
            kept = [e for e in entries if e.key() != entry.key()]
            if len(kept) == len(entries):
                return False
            self._write(kept)
            return True

    # ---- integrations: exact edits ivoai made to third-party configuration files (issue 18) ----
    # See the block at the end of this module for the record format.

    def _extras(self) -> dict[str, Any]:
        """The manifest's top-level sections other than `schema` and `entries`."""
        doc = self._document()
        if doc is None:
            return {}
        return {k: v for k, v in doc.items() if k not in ("schema", "entries")}

    def integrations(
        self, component: str | None = None, client: str | None = None
    ) -> list[IntegrationRecord]:
        """Recorded integrations, oldest first, optionally of one component and client."""
        items = self._extras().get(INTEGRATIONS_KEY, [])
        if not isinstance(items, list):
            raise OwnershipError(f"{self.path}: `{INTEGRATIONS_KEY}` must be a list")
        out = []
        for i, item in enumerate(items):
            try:
                record = _integration(item)
            except (TypeError, KeyError, ValueError):
                raise OwnershipError(f"{self.path}: integration {i} is malformed") from None
            if (component is None or record.component == component) and (
                client is None or record.client == client
            ):
                out.append(record)
        return out

    def record_integration(self, record: IntegrationRecord) -> IntegrationRecord:
        """Append an integration record (its `recorded_at` is set now).

        Raises:
            OwnershipError: invalid component name, relative file path, or the manifest is full.
        """
        if not COMPONENT_PATTERN.fullmatch(record.component):
            raise OwnershipError(f"invalid component name; expected {COMPONENT_PATTERN.pattern}")
        if not os.path.isabs(record.file):
            raise OwnershipError(f"integration file must be absolute: {record.file}")
        record = replace(record, recorded_at=_now())
        with self._locked():
            entries = self._read()
            extras = self._extras()
            items = list(extras.get(INTEGRATIONS_KEY, []))
            if len(items) >= OWNERSHIP_MAX_ENTRIES:
                raise OwnershipError(f"the ownership manifest is full ({OWNERSHIP_MAX_ENTRIES} integrations)")
            items.append(record.to_dict())
            extras[INTEGRATIONS_KEY] = items
            self._write(entries, extras)
        return record

    def forget_integration(self, record_id: str) -> bool:
        """Drop an integration record (after its edit was undone); True if it existed."""
        with self._locked():
            entries = self._read()
            extras = self._extras()
            items = list(extras.get(INTEGRATIONS_KEY, []))
            kept = [i for i in items if not (isinstance(i, dict) and i.get("id") == record_id)]
            if len(kept) == len(items):
                return False
            extras[INTEGRATIONS_KEY] = kept
            self._write(entries, extras)
            return True


# ---- Integrations: exact edits ivoai made to third-party configuration files (issue 18) ----
#
# `"integrations": [...]` in the same manifest (schema 1, additive). Each record says which file was
# edited, where (a JSON pointer to the container: "" for the document, "/hooks", "/hooks/Stop"), the
# exact text inserted there and the JSON values that text added (array items, or [key, value] pairs
# for new members), and whether ivoai created the file (then `file_text` is what it wrote). Whoever
# uninstalls removes exactly that text, or those values when the file was edited since
# (`ivoai.client.memoryhooks.jsonedit.remove_insertion`), and deletes a created file left unchanged.

INTEGRATIONS_KEY = "integrations"


@dataclass(frozen=True)
class IntegrationRecord:
    """One insertion ivoai made into a third-party client's configuration file."""

    id: str
    component: str  # e.g. "memory-hooks"
    client: str  # "codex" | "claude"
    file: str  # absolute path of the edited file
    format: str  # "json"
    location: str  # JSON pointer of the container that received `text`
    text: str  # the exact text inserted
    content: list[Any]  # the JSON values `text` added
    created_file: bool = False
    file_text: str | None = None  # the whole file as ivoai created it (when `created_file`)
    recorded_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _integration(item: Any) -> IntegrationRecord:
    if not isinstance(item, dict):
        raise TypeError("not an object")
    content = item.get("content", [])
    file_text = item.get("file_text")
    return IntegrationRecord(
        id=str(item["id"]),
        component=str(item["component"]),
        client=str(item["client"]),
        file=str(item["file"]),
        format=str(item.get("format", "json")),
        location=str(item.get("location", "")),
        text=str(item["text"]),
        content=list(content) if isinstance(content, list) else [],
        created_file=bool(item.get("created_file", False)),
        file_text=file_text if isinstance(file_text, str) else None,
        recorded_at=str(item.get("recorded_at", "")),
    )
