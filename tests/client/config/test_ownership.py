"""The ownership manifest: managed vs pre_existing, never re-labelled, private and atomic."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ivoai.client.config.errors import ConfigSchemaError, OwnershipConflictError, OwnershipError
from ivoai.client.config.ownership import Ownership, OwnershipManifest
from ivoai.common.paths import XdgPaths


def test_entries_are_recorded_privately_and_idempotently(xdg: XdgPaths) -> None:
    manifest = OwnershipManifest(xdg)
    managed = xdg.data / "components" / "codex" / "bin" / "codex"
    entry = manifest.record("codex", managed, Ownership.MANAGED)
    assert manifest.record("codex", managed, Ownership.MANAGED) == entry
    manifest.record("claude", "/usr/local/bin/claude", Ownership.PRE_EXISTING)
    assert [(e.component, e.ownership) for e in manifest.entries()] == [
        ("claude", Ownership.PRE_EXISTING),
        ("codex", Ownership.MANAGED),
    ]
    assert stat.S_IMODE(os.stat(xdg.ownership_manifest).st_mode) == 0o600
    doc = json.loads(xdg.ownership_manifest.read_text())
    assert doc["schema"] == 2
    assert {e["ownership"] for e in doc["entries"]} == {"managed", "pre_existing"}
    assert manifest.get("/usr/local/bin/claude") is not None


def test_a_pre_existing_path_is_never_relabelled_managed(xdg: XdgPaths) -> None:
    manifest = OwnershipManifest(xdg)
    path = xdg.data / "bin" / "codex"
    manifest.record("codex", path, Ownership.PRE_EXISTING)
    with pytest.raises(OwnershipConflictError, match="never changes who owns a path"):
        manifest.record("codex", path, Ownership.MANAGED)
    entry = manifest.get(path)
    assert entry is not None
    assert entry.ownership is Ownership.PRE_EXISTING


def test_managed_paths_must_live_below_the_data_root(xdg: XdgPaths, tmp_path: Path) -> None:
    with pytest.raises(OwnershipError, match="below ivoai's data root"):
        OwnershipManifest(xdg).record("codex", tmp_path / "codex", Ownership.MANAGED)
    with pytest.raises(OwnershipError, match="below ivoai's data root"):
        OwnershipManifest(xdg).record("codex", xdg.data / ".." / "escape", Ownership.MANAGED)


def test_relative_paths_and_bad_component_names_are_refused(xdg: XdgPaths) -> None:
    manifest = OwnershipManifest(xdg)
    with pytest.raises(OwnershipError, match="absolute"):
        manifest.record("codex", "bin/codex", Ownership.PRE_EXISTING)
    with pytest.raises(OwnershipError, match="invalid component name"):
        manifest.record("Codex CLI", "/usr/bin/codex", Ownership.PRE_EXISTING)


def test_forget_removes_only_the_named_path(xdg: XdgPaths) -> None:
    manifest = OwnershipManifest(xdg)
    manifest.record("codex", "/usr/bin/codex", Ownership.PRE_EXISTING)
    manifest.record("claude", "/usr/bin/claude", Ownership.PRE_EXISTING)
    assert manifest.forget("/usr/bin/codex") is True
    assert manifest.forget("/usr/bin/codex") is False
    assert [e.component for e in manifest.entries()] == ["claude"]


def test_newer_or_corrupt_manifests_fail_closed(xdg: XdgPaths) -> None:
    manifest = OwnershipManifest(xdg)
    manifest.record("codex", "/usr/bin/codex", Ownership.PRE_EXISTING)
    xdg.ownership_manifest.write_text('{"schema": 3, "entries": []}')
    with pytest.raises(ConfigSchemaError):
        manifest.entries()
    xdg.ownership_manifest.write_text('{"schema": 1, "entries": [{"component": "x"}]}')
    with pytest.raises(OwnershipError, match="entry 0 is malformed"):
        manifest.entries()
