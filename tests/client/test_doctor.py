"""Doctor's component providers: lazily imported, skipped when absent, isolated when broken."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ivoai.client.doctor import PROVIDERS, collect_components, run_doctor
from ivoai.common.paths import XdgPaths
from ivoai.core import Fact


@pytest.fixture
def provider_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "providers"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


def _module(root: Path, name: str, body: str) -> str:
    (root / f"{name}.py").write_text(textwrap.dedent(body))
    return name


def test_the_launcher_probe_provider_is_registered() -> None:
    assert "ivoai.client.agents.probes:component_statuses" in PROVIDERS


def test_a_provider_row_replaces_the_not_probed_placeholder(xdg: XdgPaths, provider_dir: Path) -> None:
    mod = _module(
        provider_dir,
        "doctor_probe_ok",
        """
        from ivoai.core import ComponentStatus, Fact, Health, HealthState, Provenance, Source
        def component_statuses(paths):
            return [ComponentStatus("codex", "executor", "CodexExecutor", installed=Fact.YES,
                                    available=Fact.YES, health=Health(HealthState.HEALTHY), version="0.171.0",
                                    provenance=Provenance(Source.PROBE, "codex --version"),
                                    active=Fact.YES, reason="requested")]
        """,
    )
    matrix, reports = collect_components(xdg, (f"{mod}:component_statuses",))
    codex = matrix.get("codex")
    assert codex is not None
    assert codex.implementation == "CodexExecutor"
    assert codex.installed is Fact.YES
    claude = matrix.get("claude")
    assert claude is not None
    assert claude.installed is Fact.NOT_PROBED
    assert [r.status for r in reports] == ["ok"]


def test_a_provider_that_takes_no_arguments_is_called_without_paths(
    xdg: XdgPaths, provider_dir: Path
) -> None:
    mod = _module(
        provider_dir,
        "doctor_probe_noargs",
        """
        from ivoai.core import ComponentStatus
        def rows():
            return [ComponentStatus("router", "knowledge_router")]
        """,
    )
    matrix, _ = collect_components(xdg, (f"{mod}:rows",))
    assert matrix.get("router") is not None


def test_a_missing_provider_module_is_skipped_as_not_available(xdg: XdgPaths) -> None:
    matrix, reports = collect_components(xdg, ("ivoai_no_such_module.probes:component_statuses",))
    assert reports[0].status == "not_available"
    assert len(matrix) == 5


def test_a_provider_with_a_broken_import_inside_is_an_error_not_a_skip(
    xdg: XdgPaths, provider_dir: Path
) -> None:
    mod = _module(provider_dir, "doctor_probe_badimport", "import ivoai_dependency_that_is_missing\n")
    _, reports = collect_components(xdg, (f"{mod}:component_statuses",))
    assert reports[0].status == "error"
    assert "ivoai_dependency_that_is_missing" in (reports[0].detail or "")


def test_a_raising_provider_is_a_redacted_problem_and_doctor_still_completes(
    xdg: XdgPaths, provider_dir: Path
) -> None:
    mod = _module(
        provider_dir,
        "doctor_probe_raises",
        """
        def component_statuses(paths):
            raise RuntimeError("upstream said Authorization: Bearer abcdefghijklmnop0123")
        """,
    )
    report = run_doctor(xdg, providers=(f"{mod}:component_statuses",))
    assert report.providers[0].status == "error"
    assert "abcdefghijklmnop0123" not in (report.providers[0].detail or "")
    assert report.ok is False
    assert report.problems == [f"doctor provider {mod}:component_statuses: {report.providers[0].detail}"]
    assert len(report.components) == 5


def test_a_provider_returning_wrong_types_is_an_error(xdg: XdgPaths, provider_dir: Path) -> None:
    mod = _module(provider_dir, "doctor_probe_wrongtype", "def component_statuses(paths):\n    return [{}]\n")
    _, reports = collect_components(xdg, (f"{mod}:component_statuses",))
    assert reports[0].status == "error"
    assert "not ComponentStatus" in (reports[0].detail or "")
