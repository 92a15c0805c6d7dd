"""The migration registry: each step's `up` and `down`, with the first release's file bytes."""

from __future__ import annotations

import json

import pytest

from ivoai.client.config.migrations import (
    DEFAULT_REGISTRY,
    MIGRATIONS,
    STORES,
    MigrationStepError,
    config_down_2,
    config_up_2,
    ownership_down_2,
    ownership_up_2,
)
from ivoai.client.config.ownership import OwnershipManifest
from ivoai.client.config.store import load
from ivoai.common.fsio import atomic_write
from ivoai.common.paths import XdgPaths

LEGACY = (
    b"# written by hand for ivoai 0.1.0\n"
    b"[auto]\nworkers = 3   # keep\n\n"
    b'[plugins.vendor]\ntoken_hint = "unknown key, kept as is"\n'
)
V060_HEADROOM = b'schema = 1\n[compression]\nprovider = "headroom"  # v0.6.0 materialized this\n'
EXPLICIT = b'schema = 1\n[compression]\nprovider = "direct"\nsource = "explicit"\n'
V1_OWNERSHIP = (
    json.dumps(
        {
            "schema": 1,
            "entries": [
                {
                    "component": "codex",
                    "path": "/usr/bin/codex",
                    "ownership": "pre_existing",
                    "recorded_at": "x",
                },
                {
                    "component": "claude",
                    "path": "/d/ivoai/bin/claude",
                    "ownership": "managed",
                    "recorded_at": "y",
                },
            ],
        },
        indent=2,
        sort_keys=True,
    ).encode()
    + b"\n"
)


def test_config_up_records_the_implicit_default_as_a_migration_and_keeps_every_other_byte() -> None:
    out = config_up_2(LEGACY)
    assert out == (
        b"schema = 2\n" + LEGACY + b'\n[compression]\nprovider = "caveman"\nsource = "migration"\n'
    )


def test_config_up_keeps_a_legacy_provider_and_never_replaces_an_explicit_one() -> None:
    assert config_up_2(V060_HEADROOM) == (
        b'schema = 2\n[compression]\nprovider = "headroom"  # v0.6.0 materialized this\n'
        b'source = "migration"\n'
    )
    assert config_up_2(EXPLICIT) == EXPLICIT.replace(b"schema = 1", b"schema = 2")


def test_config_down_reads_the_same_to_the_first_release() -> None:
    for original in (V060_HEADROOM, EXPLICIT):
        assert config_down_2(config_up_2(original)) == original
    down = config_down_2(config_up_2(LEGACY))
    # the provider stays (a v1 reader resolves caveman-without-source exactly like a missing key)
    assert down.startswith(b"schema = 1\n" + LEGACY)
    assert b"source" not in down


def test_a_config_that_does_not_parse_is_refused_by_the_step() -> None:
    with pytest.raises(MigrationStepError, match="does not parse"):
        config_up_2(b"[compression\n")


def test_ownership_up_types_every_entry_and_down_restores_the_bytes() -> None:
    up = json.loads(ownership_up_2(V1_OWNERSHIP))
    assert up["schema"] == 2
    assert {(e["kind"], e["owner"]) for e in up["entries"]} == {("executable", "components")}
    assert ownership_down_2(ownership_up_2(V1_OWNERSHIP)) == V1_OWNERSHIP


def test_ownership_down_refuses_entries_schema_1_cannot_hold() -> None:
    doc = json.loads(ownership_up_2(V1_OWNERSHIP))
    doc["entries"].append(
        {**doc["entries"][0], "kind": "config_entry", "path": "/home/u/.claude/settings.json"}
    )
    with pytest.raises(MigrationStepError, match="cannot express"):
        ownership_down_2(json.dumps(doc).encode())


def test_stores_current_versions_match_their_readers() -> None:
    from ivoai.client.components.state import COMPONENTS_SCHEMA_VERSION
    from ivoai.client.config.keys import CONFIG_SCHEMA_VERSION
    from ivoai.client.config.ownership import OWNERSHIP_SCHEMA_VERSION
    from ivoai.client.config.secrets import SECRETS_SCHEMA_VERSION
    from ivoai.client.sessions.records import RECORD_SCHEMA

    current = {s.name: s.current for s in STORES}
    assert current == {
        "config": CONFIG_SCHEMA_VERSION,
        "secrets": SECRETS_SCHEMA_VERSION,
        "ownership": OWNERSHIP_SCHEMA_VERSION,
        "sessions": RECORD_SCHEMA,
        "components": COMPONENTS_SCHEMA_VERSION,
        "quota": 1,
    }
    for store in STORES:  # every step from 1 to current exists, in order
        assert [m.version for m in DEFAULT_REGISTRY.chain(store.name, 1, store.current)] == list(
            range(2, store.current + 1)
        )
    assert len({(m.store, m.version) for m in MIGRATIONS}) == len(MIGRATIONS)


def test_pending_finds_old_files_and_the_migrated_files_load_with_the_current_readers(xdg: XdgPaths) -> None:
    atomic_write(xdg.config, xdg.config_file, LEGACY)
    atomic_write(xdg.state, xdg.ownership_manifest, V1_OWNERSHIP)
    pending = {(s.name, v) for s, _p, v in DEFAULT_REGISTRY.pending(xdg)}
    assert pending == {("config", 1), ("ownership", 1)}
    for store, path, version in DEFAULT_REGISTRY.pending(xdg):
        root = xdg.config if store.root == "config" else xdg.state
        atomic_write(
            root, path, DEFAULT_REGISTRY.migrate(store.name, path.read_bytes(), version, store.current)
        )
    assert DEFAULT_REGISTRY.pending(xdg) == []
    cfg = load(xdg).config
    assert (cfg.compression.provider, cfg.compression.source, cfg.auto.workers) == ("caveman", "migration", 3)
    assert [e.path for e in OwnershipManifest(xdg).entries()] == ["/d/ivoai/bin/claude", "/usr/bin/codex"]


def test_a_newer_file_is_left_alone(xdg: XdgPaths) -> None:
    atomic_write(xdg.config, xdg.config_file, b"schema = 9\n")
    assert DEFAULT_REGISTRY.pending(xdg) == []
