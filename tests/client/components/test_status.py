"""Doctor and status say which executable a session uses: ivoai's managed pin or the one on PATH."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ivoai.client.components.manifest import TEST_MANIFEST_ENV
from ivoai.client.components.setup import run_setup
from ivoai.client.doctor import collect_components
from ivoai.common.paths import XdgPaths
from ivoai.core import Fact, HealthState
from tests.client.components.conftest import World
from tests.client.components.helpers import context
from tests.conftest import CliRunner


def test_doctor_rows_report_the_pin_and_a_damaged_launcher(
    xdg: XdgPaths, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEST_MANIFEST_ENV, str(world.m1.path))
    matrix, reports = collect_components(xdg, ("ivoai.client.components.status:component_statuses",))
    assert [r.status for r in reports] == ["ok"]
    row = matrix.get("tool", "managed_component")
    assert row is not None and row.installed is Fact.YES and row.health.state is HealthState.HEALTHY
    assert row.version == "1.0.0" and "managed pin 1.0.0" in (row.reason or "")
    (xdg.data / "bin" / "tool").write_text("#!/bin/sh\n")
    matrix, _ = collect_components(xdg, ("ivoai.client.components.status:component_statuses",))
    row = matrix.get("tool", "managed_component")
    assert row is not None and row.health.state is HealthState.DEGRADED
    assert "ivoai setup" in str(row.health.reason)
    assert run_setup(context(xdg), world.m1).results[0].action == "repaired"


def test_status_names_the_managed_pin_or_the_path_executable(
    xdg: XdgPaths, tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = tmp_path / "bin"
    own.mkdir()
    (own / "claude").write_text("#!/bin/sh\n")
    (own / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{own}{os.pathsep}{os.environ['PATH']}")
    managed = xdg.data / "bin"
    managed.mkdir(parents=True, mode=0o700)
    (managed / "codex").write_text("#!/bin/sh\n")
    (managed / "codex").chmod(0o700)
    doc = json.loads(cli("status", "--json").out)["executables"]
    assert doc["codex"]["origin"] == "managed" and doc["codex"]["path"] == str(managed / "codex")
    assert doc["claude"] == {"origin": "path", "path": str(own / "claude"), "managed_version": None}
    text = cli("status").out
    assert f"claude: path: {own / 'claude'}" in text
