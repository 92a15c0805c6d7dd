"""The ownership manifest `$XDG_STATE_HOME/ivoai/ownership.json`: which component paths ivoai manages,
and (`integrations`, see the end of this module) which edits it made to third-party config files.

`managed` paths were created by ivoai and live below its XDG data root; uninstall may remove them.
`pre_existing` paths belonged to the user before ivoai ran (a `codex` already on PATH); ivoai never
deletes or replaces them, and an entry never changes from `pre_existing` to `managed`.

File format (schema 1)::

    {"schema": 1, "entries": [{"component": "codex", "path": "/abs/path",
                               "ownership": "managed", "recorded_at": "2026-...Z"}]}
"""

from __future__ import annotations

import json
import os
import re
import time
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from ivoai.client.config.errors import ConfigSchemaError, OwnershipConflictError, OwnershipError
from ivoai.common.fsio import atomic_write, file_lock, read_private_file_or_none, remove_stale_staging
from ivoai.common.jsonio import dumps_bytes
from ivoai.common.limits import JSON_STATE_MAX_BYTES, OWNERSHIP_MAX_ENTRIES
from ivoai.common.paths import XdgPaths

OWNERSHIP_SCHEMA_VERSION = 1
COMPONENT_PATTERN = re.compile(r"[a-z][a-z0-9._-]{0,63}")


class Ownership(StrEnum):
    """Who owns a component path."""

    MANAGED = "managed"
    PRE_EXISTING = "pre_existing"


@dataclass(frozen=True)
class OwnershipEntry:
    """One recorded component path."""

    component: str
    path: str
    ownership: Ownership
    recorded_at: str


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class OwnershipManifest:
    """Read and update the manifest; mutations are locked and atomically published."""

    def __init__(self, paths: XdgPaths) -> None:
        self._paths = paths

    @property
    def path(self) -> Path:
        return self._paths.ownership_manifest

    def _locked(self) -> AbstractContextManager[None]:
        return file_lock(self._paths.state, self._paths.state / ".ownership.json.lock")

    def _read(self) -> list[OwnershipEntry]:
        raw = read_private_file_or_none(self._paths.state, self.path, JSON_STATE_MAX_BYTES)
        if raw is None:
            return []
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise OwnershipError(f"{self.path} is not valid JSON; restore it or delete it") from None
        if not isinstance(doc, dict):
            raise OwnershipError(f"{self.path}: expected a JSON object")
        schema = doc.get("schema")
        if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
            raise OwnershipError(f"{self.path}: `schema` must be a positive integer")
        if schema > OWNERSHIP_SCHEMA_VERSION:
            raise ConfigSchemaError(
                f"{self.path} has schema {schema}, newer than this ivoai understands "
                f"({OWNERSHIP_SCHEMA_VERSION}); upgrade ivoai (the file was not changed)"
            )
        items = doc.get("entries")
        if not isinstance(items, list):
            raise OwnershipError(f"{self.path}: `entries` must be a list")
        out: list[OwnershipEntry] = []
        for i, item in enumerate(items):
            try:
                entry = OwnershipEntry(
                    component=str(item["component"]),
                    path=str(item["path"]),
                    ownership=Ownership(item["ownership"]),
                    recorded_at=str(item.get("recorded_at", "")),
                )
            except (TypeError, KeyError, ValueError, AttributeError):
                raise OwnershipError(f"{self.path}: entry {i} is malformed") from None
            out.append(entry)
        return out

    def _write(self, entries: list[OwnershipEntry], extras: dict[str, Any] | None = None) -> None:
        remove_stale_staging(self._paths.state, self.path)
        # Other top-level sections (`integrations`, below) are kept as they are.
        doc = {
            **(self._extras() if extras is None else extras),
            "schema": OWNERSHIP_SCHEMA_VERSION,
            "entries": [asdict(e) for e in entries],
        }
        atomic_write(self._paths.state, self.path, dumps_bytes(doc))

    def entries(self) -> list[OwnershipEntry]:
        """All entries, sorted by component then path."""
        return sorted(self._read(), key=lambda e: (e.component, e.path))

    def get(self, path: str | Path) -> OwnershipEntry | None:
        """The entry for an absolute path, or None."""
        wanted = os.path.abspath(path)
        return next((e for e in self._read() if e.path == wanted), None)

    def record(self, component: str, path: str | Path, ownership: Ownership) -> OwnershipEntry:
        """Record `path` of `component` as managed or pre-existing (idempotent).

        Raises:
            OwnershipError: invalid component name, relative path, or a managed path outside the data root.
            OwnershipConflictError: the path is already recorded with another ownership or component.
        """
        if not COMPONENT_PATTERN.fullmatch(component):
            raise OwnershipError(f"invalid component name; expected {COMPONENT_PATTERN.pattern}")
        if not os.path.isabs(path):
            raise OwnershipError(f"component path must be absolute: {path}")
        abspath = os.path.abspath(path)
        data_root = os.path.abspath(self._paths.data)
        if ownership is Ownership.MANAGED and os.path.commonpath([abspath, data_root]) != data_root:
            raise OwnershipError(f"a managed path must live below ivoai's data root {data_root}: {abspath}")
        with self._locked():
            entries = self._read()
            for existing in entries:
                if existing.path != abspath:
                    continue
                if existing.ownership is ownership and existing.component == component:
                    return existing
                raise OwnershipConflictError(
                    f"{abspath} is already recorded as {existing.ownership.value} for {existing.component}; "
                    "ivoai never changes who owns a path"
                )
            if len(entries) >= OWNERSHIP_MAX_ENTRIES:
                raise OwnershipError(f"the ownership manifest is full ({OWNERSHIP_MAX_ENTRIES} entries)")
            entry = OwnershipEntry(component, abspath, ownership, _now())
            entries.append(entry)
            self._write(entries)
            return entry

    def forget(self, path: str | Path) -> bool:
        """Remove the entry for `path` (after its managed file was removed); True if it existed."""
        wanted = os.path.abspath(path)
        with self._locked():
            entries = self._read()
            kept = [e for e in entries if e.path != wanted]
            if len(kept) == len(entries):
                return False
            self._write(kept)
            return True


    # ---- integrations: exact edits ivoai made to third-party configuration files (issue 18) ----
    # See the block at the end of this module for the record format.

    def _extras(self) -> dict[str, Any]:
        """The manifest's top-level sections other than `schema` and `entries`."""
        raw = read_private_file_or_none(self._paths.state, self.path, JSON_STATE_MAX_BYTES)
        if raw is None:
            return {}
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise OwnershipError(f"{self.path} is not valid JSON; restore it or delete it") from None
        if not isinstance(doc, dict):
            raise OwnershipError(f"{self.path}: expected a JSON object")
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
