"""`ivoai status`, `ivoai doctor` and `ivoai --version` through the real CLI entry point."""

from __future__ import annotations

import json
import os
import pty
import select
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ivoai.client.config.secrets import SecretsStore, new_secret_id
from ivoai.client.config.store import set_key
from ivoai.common.paths import XdgPaths
from tests.conftest import CliRunner, run_ivoai

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_version_prints_the_package_version(cli: CliRunner) -> None:
    result = cli("--version")
    assert result.code == 0
    assert result.out == "ivoai 0.1.0\n"


def test_doctor_json_on_a_fresh_home_reports_every_path_and_not_probed(cli: CliRunner, xdg: XdgPaths) -> None:
    result = cli("doctor", "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["schema"] == 1
    assert doc["ok"] is True
    names = {p["name"]: p for p in doc["paths"]}
    for name in ("config", "config_file", "secrets_file", "data", "state", "ownership_manifest", "cache"):
        assert names[name]["exists"] is False
        assert names[name]["status"] == "missing"
        assert "mode" in names[name]
    assert {c["component"] for c in doc["components"]} >= {
        "codex",
        "claude",
        "opencode",
        "caveman",
        "headroom",
    }
    for comp in doc["components"]:
        if comp["implementation"] is None:
            assert comp["installed"] == comp["available"] == comp["health"]["state"] == "not_probed"
    assert doc["versions"]["ivoai"] == "0.1.0"
    # the credential scan's engines are dependencies: reported with their installed versions
    assert doc["versions"]["google-re2"] != "not installed"
    assert doc["versions"]["hyperscan"] != "not installed"
    # doctor is read-only: a fresh home stays empty.
    assert not any(root.exists() for root in xdg.roots().values())


def test_doctor_reports_modes_of_existing_paths(cli: CliRunner, xdg: XdgPaths) -> None:
    set_key("compression.provider", "direct", xdg)
    doc = json.loads(cli("doctor", "--json").out)
    names = {p["name"]: p for p in doc["paths"]}
    assert names["config"]["mode"] == "0700"
    assert names["config_file"]["mode"] == "0600"
    assert names["config_file"]["status"] == "ok"
    assert doc["config"]["values"]["compression.provider"] == {"value": "direct", "origin": "file"}


def test_doctor_flags_a_world_readable_secrets_file_and_exits_1(cli: CliRunner, xdg: XdgPaths) -> None:
    SecretsStore(xdg).put(new_secret_id("prof"), SECRET)
    os.chmod(xdg.secrets_file, 0o644)
    result = cli("doctor", "--json")
    assert result.code == 1
    doc = json.loads(result.out)
    assert doc["ok"] is False
    entry = next(p for p in doc["paths"] if p["name"] == "secrets_file")
    assert entry["status"] == "unsafe"
    assert entry["mode"] == "0644"
    assert any(str(xdg.secrets_file) in line and "chmod 0600" in line for line in doc["problems"])
    assert SECRET not in result.out + result.err


def test_doctor_and_status_never_print_secret_values(cli: CliRunner, xdg: XdgPaths) -> None:
    SecretsStore(xdg).put(new_secret_id("prof"), SECRET)
    xdg.config.mkdir(parents=True, exist_ok=True)
    xdg.config_file.write_text(f'schema = 1\n[plugins]\ntoken = "{SECRET}"\n')
    os.chmod(xdg.config_file, 0o600)
    for args in (
        ("doctor",),
        ("doctor", "--json"),
        ("status",),
        ("status", "--json"),
        ("config", "show", "--json"),
    ):
        result = cli(*args)
        assert result.code == 0, (args, result.err)
        assert SECRET not in result.out + result.err
    shown = json.loads(cli("config", "show", "--json").out)
    assert shown["other_keys"] == ["plugins"]


def test_doctor_text_output_is_plain_without_a_tty(cli: CliRunner) -> None:
    result = cli("doctor")
    assert result.code == 0
    assert "\x1b[" not in result.out
    assert "not probed" in result.out
    assert "no problems found" in result.out


def test_status_json_summarizes_identity_compression_and_counts(cli: CliRunner, xdg: XdgPaths) -> None:
    fresh = json.loads(cli("status", "--json").out)
    assert fresh["identity"].startswith("host:")
    assert fresh["config"] == {
        "status": "missing",
        "compression_provider": "caveman",
        "compression_source": "default",
    }
    assert fresh["secrets"] == {"count": 0}
    set_key("compression.provider", "headroom", xdg)
    SecretsStore(xdg).put(new_secret_id("prof"), SECRET)
    after = json.loads(cli("status", "--json").out)
    assert after["config"] == {
        "status": "ok",
        "compression_provider": "headroom",
        "compression_source": "explicit",
    }
    assert after["secrets"] == {"count": 1}
    assert after["ok"] is True


def test_status_with_a_corrupt_config_exits_1_naming_file_and_line(cli: CliRunner, xdg: XdgPaths) -> None:
    xdg.config.mkdir(parents=True, mode=0o700)
    xdg.config_file.write_text("schema = 1\n[compression\n")
    os.chmod(xdg.config_file, 0o600)
    result = cli("status", "--json")
    assert result.code == 1
    doc = json.loads(result.out)
    assert doc["config"]["status"] == "error"
    assert any(str(xdg.config_file) in p and "line 2" in p for p in doc["problems"])


def test_a_value_ivoai_does_not_accept_fails_status_and_doctor_naming_file_key_and_choices(
    cli: CliRunner, xdg: XdgPaths
) -> None:
    xdg.config.mkdir(parents=True, mode=0o700)
    xdg.config_file.write_text('schema = 1\n[compression]\nprovider = "fast"\n[auto]\nworkers = 9\n')
    os.chmod(xdg.config_file, 0o600)
    expected = (
        f"{xdg.config_file}: auto.workers must be an integer 1..3; "
        "compression.provider must be one of: caveman, headroom, direct"
    )
    status, doctor = cli("status", "--json"), cli("doctor", "--json")
    assert (status.code, doctor.code) == (1, 1)
    for doc in (json.loads(status.out), json.loads(doctor.out)):
        assert doc["config"]["status"] == "error"
        assert any(expected in p for p in doc["problems"]), doc["problems"]
    assert "(fix: ivoai config set KEY VALUE for each)" in cli("status").err
    # `config set` repairs bad values one by one instead of refusing to read the file it would fix.
    assert cli("config", "set", "auto.workers", "2").code == 0
    still = cli("status")
    assert still.code == 1
    assert "compression.provider must be one of: caveman, headroom, direct" in still.err
    assert "(fix: ivoai config set compression.provider VALUE)" in still.err
    assert cli("config", "set", "compression.provider", "direct").code == 0
    assert cli("status", "--json").code == 0


def test_a_symlinked_config_directory_makes_doctor_fail_with_the_fix(
    cli: CliRunner, xdg: XdgPaths, tmp_path: Path
) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (real / "planted").write_text("x")
    xdg.config.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(real, xdg.config)
    result = cli("doctor", "--json")
    assert result.code == 1
    reported = json.loads(result.out)["paths"]
    assert not [p for p in reported if p["name"].startswith("config/")]
    entry = next(p for p in reported if p["name"] == "config")
    assert entry["kind"] == "symlink"
    assert entry["status"] == "unsafe"
    assert "symlink" in entry["problem"]


def _dirs_not_0700(root: Path) -> list[str]:
    return [
        f"{oct(stat.S_IMODE(os.lstat(d).st_mode))} {d}"
        for d in [root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]
        if stat.S_IMODE(os.lstat(d).st_mode) != 0o700
    ]


def test_a_fresh_quickstart_creates_only_private_dirs_and_doctor_and_status_agree(
    cli: CliRunner, xdg: XdgPaths, tmp_path: Path
) -> None:
    os.umask(0o022)
    source = tmp_path / "notes"
    source.mkdir()
    (source / "vpn.txt").write_text("Connect to the office VPN with the vpn profile.\n")
    result = cli("quickstart", str(source), "--no-serve", "--port", "0", "--json")
    assert result.code == 0, result.err
    assert xdg.server_data_dir.is_dir()  # the default data dir, below the XDG data root
    # The data root's missing parent, the root, the server dir and every directory below it
    # (Qdrant Edge's segment directories included) are private.
    assert _dirs_not_0700(xdg.data.parent) == []
    doctor, status = cli("doctor", "--json"), cli("status", "--json")
    assert (doctor.code, status.code) == (0, 0), doctor.out + status.err
    assert json.loads(doctor.out)["ok"] is json.loads(status.out)["ok"] is True


def test_status_and_doctor_give_one_verdict_on_a_loose_data_root(cli: CliRunner, xdg: XdgPaths) -> None:
    xdg.data.mkdir(parents=True)
    os.chmod(xdg.data, 0o755)
    doctor, status = cli("doctor", "--json"), cli("status", "--json")
    assert (doctor.code, status.code) == (1, 1)
    doctor_doc, status_doc = json.loads(doctor.out), json.loads(status.out)
    assert doctor_doc["ok"] is status_doc["ok"] is False
    assert status_doc["problems"] == doctor_doc["problems"]
    assert any(f"chmod 0700 {xdg.data}" in p for p in status_doc["problems"])
    assert status_doc["paths"]["data"]["status"] == "unsafe"
    human = cli("status")
    assert human.code == 1 and "(unsafe)" in human.out and "chmod 0700" in human.err


def test_the_real_console_process_runs_doctor_json(xdg: XdgPaths) -> None:
    proc = run_ivoai("doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ok"] is True


@pytest.mark.parametrize("args", [("doctor", "--bogus"), ("status", "extra"), ("nonexistent-command",)])
def test_usage_errors_exit_2(cli: CliRunner, args: tuple[str, ...]) -> None:
    assert cli(*args).code == 2


def _run_on_a_pty(*args: str, env: dict[str, str]) -> str:
    """Run `python -m ivoai ARGS` with stdout and stderr on a pseudo-terminal; return what it printed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "ivoai", *args], stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 60.0)
            assert ready, "no output from ivoai within 60 s"
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
        proc.wait(timeout=60)
    return b"".join(chunks).decode("utf-8", "replace")


def test_doctor_draws_tables_on_a_tty_without_reading_paths_as_markup(xdg: XdgPaths) -> None:
    (xdg.config / "[a]").mkdir(parents=True, mode=0o700)
    os.chmod(xdg.config, 0o700)
    env = dict(os.environ, COLUMNS="200")
    out = _run_on_a_pty("doctor", env=env)
    assert "┏" in out
    assert "config/[a]" in out
    assert "\x1b[3" not in out.replace("\x1b[3m", "")  # NO_COLOR (set by the fixture): no colour codes


def test_json_schemas_of_status_and_doctor_are_stable(cli: CliRunner) -> None:
    status = json.loads(cli("status", "--json").out)
    assert sorted(status) == [
        "config",
        "executables",  # issue 17: managed pin or PATH, per client
        "identity",
        "identity_kind",
        "ok",
        "ownership",
        "paths",
        "problems",
        "schema",
        "secrets",
        "version",
    ]
    doctor = json.loads(cli("doctor", "--json").out)
    assert sorted(doctor) == [
        "components",
        "config",
        "identity",
        "ok",
        "ownership",
        "paths",
        "problems",
        "providers",
        "schema",
        "secrets",
        "servers",
        "versions",
    ]
    assert sorted(doctor["paths"][0]) == [
        "exists",
        "expected",
        "kind",
        "mode",
        "name",
        "owned_by_you",
        "path",
        "problem",
        "status",
    ]
    assert sorted(doctor["components"][0]) == [
        "active",
        "available",
        "capabilities",
        "component",
        "fallback",
        "health",
        "implementation",
        "installed",
        "kind",
        "provenance",
        "reason",
        "version",
    ]
