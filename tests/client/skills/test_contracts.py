"""The core skill contracts (identity, probe, discovery) over the control plane's implementations."""

from __future__ import annotations

from pathlib import Path

from ivoai.client.skills.service import InstalledSkills, SkillService, make_source
from ivoai.client.skills.sources import BuiltinSource, LocalDirSource
from ivoai.common.paths import XdgPaths
from ivoai.core.health import HealthState
from ivoai.core.skills import SkillRegistry, SkillSource
from tests.client.skills.helpers import write_skill


def test_sources_and_the_registry_satisfy_the_core_contracts(xdg: XdgPaths, tmp_path: Path) -> None:
    write_skill(tmp_path / "src", "alpha", "version: 0.1.0\n")
    local = LocalDirSource(str(tmp_path / "src"))
    assert isinstance(local, SkillSource) and isinstance(BuiltinSource(), SkillSource)
    assert local.source_id == f"dir:{tmp_path / 'src'}" and local.probe().state is HealthState.HEALTHY
    assert [(r.name, r.version, r.digest) for r in local.discover()] == [("alpha", "0.1.0", None)]
    assert [r.name for r in BuiltinSource().discover()] == ["ivoai-memory-context"]

    installed = InstalledSkills()
    assert isinstance(installed, SkillRegistry)
    assert installed.get("alpha") is None and installed.probe().state is HealthState.HEALTHY
    SkillService().add(make_source(str(tmp_path / "src")))
    ref = installed.get("alpha")
    assert ref is not None and ref.digest is not None and ref.digest.startswith("sha256:")


def test_a_local_source_with_bad_skills_probes_degraded_and_a_missing_one_unhealthy(tmp_path: Path) -> None:
    write_skill(tmp_path / "src", "bad", "risk: banana\n")
    assert LocalDirSource(str(tmp_path / "src")).probe().state is HealthState.DEGRADED
    assert LocalDirSource(str(tmp_path / "nowhere")).probe().state is HealthState.UNHEALTHY


def test_doctor_gets_a_read_only_skill_registry_row(xdg: XdgPaths, tmp_path: Path) -> None:
    from ivoai.client.doctor import PROVIDERS, collect_components

    assert "ivoai.client.skills.service:component_statuses" in PROVIDERS
    matrix, reports = collect_components(xdg, ("ivoai.client.skills.service:component_statuses",))
    row = matrix.get("skills")
    assert (
        row is not None and row.health.state is HealthState.HEALTHY and [r.status for r in reports] == ["ok"]
    )
    assert row.reason is not None and row.reason.startswith("1 active, enabled skill(s)")
    assert not xdg.state.exists()
