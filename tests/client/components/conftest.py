"""Fixtures shared by the update tests: v1 of a stand-in tool installed, a v2 manifest, old state files."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ivoai.client.components.manifest import Manifest, load_manifest
from ivoai.client.components.setup import run_setup
from ivoai.common.fsio import ensure_private_dir
from ivoai.common.paths import XdgPaths
from tests.client.components.helpers import (
    ArtifactServer,
    artifact_component,
    context,
    serve,
    tar_gz,
    tool_script,
    tree_bytes,
    write_manifest,
)

V1, V2 = tool_script("1.0.0"), tool_script("2.0.0")
A1, A2 = tar_gz({"bin/tool": V1}), tar_gz({"bin/tool": V2})
LEGACY_CONFIG = (
    b'# my settings\n[compression]\nprovider = "headroom"   # v0.6.0 wrote this\n\n[plugins.x]\nkeep = "me"\n'
)
V1_OWNERSHIP = (
    b'{\n  "entries": [\n    {\n      "component": "codex",\n      "ownership": "pre_existing",\n'
    b'      "path": "/usr/bin/codex",\n      "recorded_at": "2026-11-30T00:00:00Z"\n    }\n'
    b'  ],\n  "schema": 1\n}\n'
)


@dataclass
class World:
    server: ArtifactServer
    m1: Manifest
    m2: Manifest


@pytest.fixture
def world(xdg: XdgPaths, tmp_path: Path) -> Iterator[World]:
    """v1 of `tool` installed by setup; a v2 manifest ready; a legacy config and a v1 ownership file."""
    with serve(ArtifactServer({"t1.tgz": A1, "t2.tgz": A2})) as srv:
        m1 = load_manifest(
            write_manifest(
                tmp_path / "m1", artifact_component("tool", "1.0.0", srv.url("t1.tgz"), A1, {"bin/tool": V1})
            )
        )
        m2 = load_manifest(
            write_manifest(
                tmp_path / "m2", artifact_component("tool", "2.0.0", srv.url("t2.tgz"), A2, {"bin/tool": V2})
            )
        )
        assert run_setup(context(xdg), m1).ok
        ensure_private_dir(xdg.config)
        xdg.config_file.write_bytes(LEGACY_CONFIG)
        xdg.config_file.chmod(0o600)
        xdg.ownership_manifest.write_bytes(V1_OWNERSHIP)
        yield World(srv, m1, m2)


def _snapshot(xdg: XdgPaths) -> dict[str, bytes | str]:
    return tree_bytes(xdg.config, xdg.data, xdg.state)


def snapshot(xdg: XdgPaths) -> dict[str, bytes | str]:
    """Every byte of ivoai's config, data and state roots."""
    return tree_bytes(xdg.config, xdg.data, xdg.state)
