"""`ivoai update`, `--dry-run` and `--rollback [--force]` as journaled transactions.

Component moves use archive components served on loopback (two versions of a stand-in tool): the
update machinery is kind-agnostic, and the npm and pip installers are exercised for real in
`test_setup_npm_real.py` and `test_setup_pip_real.py`.
"""

from __future__ import annotations

import json

import pytest

from ivoai.client.components.errors import (
    MigrationError,
    NothingToRollBackError,
    RollbackConflictError,
    UpdateError,
)
from ivoai.client.components.manifest import TEST_MANIFEST_ENV
from ivoai.client.components.update import run_rollback, run_update
from ivoai.client.config.migrations import MIGRATIONS, STORES, Migration, MigrationStepError, Registry, Store
from ivoai.common.paths import XdgPaths
from tests.client.components.conftest import LEGACY_CONFIG, V1, V2, World, snapshot
from tests.client.components.helpers import (
    context,
)
from tests.conftest import CliRunner


def test_dry_run_stages_and_probes_but_changes_nothing(xdg: XdgPaths, world: World) -> None:
    before = snapshot(xdg)
    report = run_update(context(xdg), world.m2, dry_run=True)
    assert report.action == "dry_run"
    assert [(c.name, c.from_version, c.to_version, c.probe) for c in report.components] == [
        ("tool", "1.0.0", "2.0.0", "2.0.0")
    ]
    assert {m["store"] for m in report.migrations} == {"config", "ownership"}
    assert snapshot(xdg) == before


def test_update_promotes_migrates_verifies_and_commits(xdg: XdgPaths, world: World) -> None:
    report = run_update(context(xdg), world.m2)
    assert report.action == "updated" and report.verify is not None and report.verify["doctor_ok"] is True
    assert (xdg.data / "bin" / "tool").read_bytes() == V2
    config = xdg.config_file.read_text()
    assert config.startswith(
        'schema = 2\n# my settings\n[compression]\nprovider = "headroom"   # v0.6.0 wrote this\n'
    )
    assert 'source = "migration"' in config and '[plugins.x]\nkeep = "me"\n' in config
    assert json.loads(xdg.ownership_manifest.read_text())["schema"] == 2
    generations = sorted(p.name for p in (xdg.data / "components" / "tool").iterdir())
    assert [g.split("-")[0] for g in generations] == ["1.0.0", "2.0.0"]  # the previous one stays for rollback
    assert not (xdg.state / "update" / "journal.json").exists()
    assert json.loads((xdg.state / "update" / "last.json").read_text())["phase"] == "COMMIT"
    again = run_update(context(xdg), world.m2)
    assert (again.action, again.components, again.migrations) == ("up_to_date", [], [])


def test_rollback_restores_executables_and_state_byte_for_byte(xdg: XdgPaths, world: World) -> None:
    before = snapshot(xdg)
    run_update(context(xdg), world.m2)
    report = run_rollback(context(xdg), world.m2)
    assert report.action == "rolled_back"
    assert [(c.name, c.from_version, c.to_version) for c in report.components] == [("tool", "2.0.0", "1.0.0")]
    after = snapshot(xdg)
    assert {k: v for k, v in after.items() if "/update/" not in k} == {
        k: v for k, v in before.items() if "/update/" not in k
    }
    assert (xdg.data / "bin" / "tool").read_bytes() == V1
    with pytest.raises(NothingToRollBackError):
        run_rollback(context(xdg), world.m2)


def test_rollback_refuses_files_changed_after_the_update_unless_forced(xdg: XdgPaths, world: World) -> None:
    run_update(context(xdg), world.m2)
    edited = xdg.config_file.read_bytes() + b'\n[mine]\nadded = "after the update"\n'
    xdg.config_file.write_bytes(edited)
    with pytest.raises(RollbackConflictError, match=r"1 file\(s\) changed after the update: .*config.toml"):
        run_rollback(context(xdg), world.m2)
    assert xdg.config_file.read_bytes() == edited
    assert (xdg.data / "bin" / "tool").read_bytes() == V2  # nothing was rolled back
    run_rollback(context(xdg), world.m2, force=True)
    assert xdg.config_file.read_bytes() == LEGACY_CONFIG
    assert (xdg.data / "bin" / "tool").read_bytes() == V1


def _failing_registry(after_files: int) -> Registry:
    """The real migrations plus a sessions step that fails on the Nth record (a migration halfway)."""
    calls = {"n": 0}

    def up(raw: bytes) -> bytes:
        calls["n"] += 1
        if calls["n"] > after_files:
            raise MigrationStepError("sessions: synthetic failure halfway through")
        doc = json.loads(raw)
        return json.dumps({**doc, "schema": 2}).encode()

    def down(raw: bytes) -> bytes:
        return json.dumps({**json.loads(raw), "schema": 1}).encode()

    stores = tuple(
        Store(s.name, s.root, 2, s.pattern, s.format) if s.name == "sessions" else s for s in STORES
    )
    return Registry(stores, (*MIGRATIONS, Migration("sessions", 2, "synthetic", up, down)))


def _sessions(xdg: XdgPaths, count: int) -> None:
    sessions = xdg.state / "sessions"
    sessions.mkdir(mode=0o700, exist_ok=True)
    for i in range(count):
        path = sessions / f"ses_{i:032x}.json"
        path.write_text(json.dumps({"schema": 1, "id": f"ses_{i:032x}", "state": "ended"}))
        path.chmod(0o600)


def test_a_migration_failing_halfway_rolls_everything_back_byte_for_byte(xdg: XdgPaths, world: World) -> None:
    _sessions(xdg, 4)
    before = snapshot(xdg)
    with pytest.raises(
        MigrationError, match="update rolled back at MIGRATE: sessions: synthetic failure halfway"
    ):
        run_update(context(xdg), world.m2, registry=_failing_registry(after_files=2))
    assert snapshot(xdg) == before
    assert not (xdg.state / "update" / "journal.json").exists()


def test_session_records_written_after_an_update_are_migrated_down_on_rollback(
    xdg: XdgPaths, world: World
) -> None:
    _sessions(xdg, 1)
    registry = _failing_registry(after_files=100)
    run_update(context(xdg), world.m2, registry=registry)
    late = xdg.state / "sessions" / f"ses_{'f' * 32}.json"
    late.write_text(json.dumps({"schema": 2, "id": f"ses_{'f' * 32}", "state": "ended"}))
    late.chmod(0o600)
    report = run_rollback(context(xdg), world.m2, registry=registry)
    assert json.loads(late.read_text())["schema"] == 1
    assert {"store": "sessions", "file": str(late), "from": 2, "to": 1} in report.migrations


def test_a_failed_verification_rolls_the_update_back(
    xdg: XdgPaths, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(xdg)

    def broken_doctor(*_args: object, **_kwargs: object) -> object:
        raise UpdateError("doctor found problems after the update: synthetic")

    monkeypatch.setattr("ivoai.client.components.update._verify", broken_doctor)
    with pytest.raises(UpdateError, match="update rolled back at VERIFY"):
        run_update(context(xdg), world.m2)
    assert snapshot(xdg) == before


def test_rollback_with_dry_run_is_refused_and_force_needs_rollback(cli: CliRunner) -> None:
    res = cli("update", "--rollback", "--dry-run")
    assert res.code == 2 and "--rollback cannot be combined with --dry-run" in res.err
    res = cli("update", "--force")
    assert res.code == 2 and "--force only applies to --rollback" in res.err


def test_update_cli_json_reports_no_changes_when_up_to_date(
    xdg: XdgPaths, world: World, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEST_MANIFEST_ENV, str(world.m1.path))
    assert cli("update").code == 0  # migrations only
    res = cli("update", "--dry-run", "--json")
    doc = json.loads(res.out)
    assert (res.code, doc["action"], doc["components"], doc["migrations"]) == (0, "dry_run", [], [])
