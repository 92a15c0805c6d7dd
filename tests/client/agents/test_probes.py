"""Doctor rows from the real clients: installed, available and healthy are separate facts."""

from __future__ import annotations

import os

import pytest

from ivoai.client.agents.probes import component_statuses
from ivoai.common.paths import XdgPaths
from ivoai.core import Fact, HealthState
from tests.conftest import tool_path


def test_real_clients_are_installed_available_but_not_logged_in(
    xdg: XdgPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{tool_path('codex').parent}:/usr/bin:/bin")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-" + "x" * 40)  # probes must not see it
    rows = {(r.component, r.kind): r for r in component_statuses(xdg)}
    for name in ("codex", "claude"):
        row = rows[(name, "executor")]
        assert row.installed is Fact.YES and row.available is Fact.YES
        assert row.version and row.version[0].isdigit()
        assert row.health.state is HealthState.DEGRADED
        assert "not logged in" in (row.health.reason or "")
    opencode = rows[("opencode", "executor")]
    assert opencode.installed is Fact.NO and opencode.active is Fact.NO
    cave = rows[("caveman", "compression_provider")]
    assert cave.installed is Fact.NO and cave.active is Fact.NO
    assert cave.fallback is not None and cave.fallback.effective == "direct"
    assert "requested by compression.provider (default)" in (cave.reason or "")
    assert rows[("direct", "compression_provider")].active is Fact.YES
    assert os.environ["OPENAI_API_KEY"]


def test_doctor_shows_the_launcher_rows(xdg: XdgPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    from ivoai.client.doctor import collect_components

    monkeypatch.setenv("PATH", f"{tool_path('codex').parent}:/usr/bin:/bin")
    matrix, reports = collect_components(xdg)
    assert {r.provider: r.status for r in reports}["ivoai.client.agents.probes:component_statuses"] == "ok"
    assert all(r.status == "ok" for r in reports)  # and the managed-component rows (issue 17)
    codex = matrix.get("codex", "executor")
    assert codex is not None and codex.implementation == "CodexExecutor" and codex.installed is Fact.YES
