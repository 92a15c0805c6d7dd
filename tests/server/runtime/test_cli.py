"""`ivoai server init|start|status`, `enrollment`, `clients`, `web-access` and `skill export`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

from ivoai.common.command import ivoai_command
from tests.conftest import CliRunner, run_ivoai


def test_init_creates_private_layout_and_config_and_is_idempotent(cli: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "srv"
    first = cli("server", "--data-dir", str(root), "init", "--json")
    assert first.code == 0, first.err
    assert json.loads(first.out)["config_created"] is True
    again = json.loads(cli("server", "--data-dir", str(root), "init", "--json").out)
    assert again["config_created"] is False
    assert oct(os.stat(root).st_mode & 0o777) == "0o700"
    assert oct(os.stat(root / "config.toml").st_mode & 0o777) == "0o600"
    for sub in ("enrollment", "oauth", "secrets", "run"):
        assert oct(os.stat(root / sub).st_mode & 0o777) == "0o700"


def test_enrollment_create_prints_code_once_and_list_never_shows_it(cli: CliRunner, tmp_path: Path) -> None:
    root = str(tmp_path / "srv")
    created = cli("server", "--data-dir", root, "enrollment", "create", "--ttl", "5m", "--json")
    assert created.code == 0, created.err
    body = json.loads(created.out)
    assert set(body) == {"id", "code", "expires_at"}
    listed = cli("server", "--data-dir", root, "enrollment", "list", "--json")
    assert body["code"] not in listed.out
    assert json.loads(listed.out)[0]["status"] == "open"
    plain = cli("server", "--data-dir", root, "enrollment", "create")
    assert len(plain.out.strip()) == 43 and "expires" in plain.err
    revoked = cli("server", "--data-dir", root, "enrollment", "revoke", body["id"])
    assert revoked.code == 0
    missing = cli("server", "--data-dir", root, "enrollment", "revoke", "enr_nope")
    assert missing.code == 1 and "enrollment list" in missing.err


def test_bad_ttl_and_scope_are_usage_errors_naming_the_limit(cli: CliRunner, tmp_path: Path) -> None:
    root = str(tmp_path / "srv")
    ttl = cli("server", "--data-dir", root, "enrollment", "create", "--ttl", "3d")
    assert ttl.code == 1 and "--ttl: must be between 1 second and 86400 seconds" in ttl.err
    scope = cli("server", "--data-dir", root, "enrollment", "create", "--scopes", "admin:all")
    assert scope.code == 1 and "unknown scope(s) admin:all" in scope.err


def test_clients_list_and_revoke(cli: CliRunner, tmp_path: Path) -> None:
    from ivoai.server.auth.enrollment import EnrollmentStore
    from ivoai.server.datadir import ServerDataDir

    data = ServerDataDir(tmp_path / "srv").ensure()
    store = EnrollmentStore(data.root, data.enrollment)
    client = store.exchange(store.create_code().code)
    listed = json.loads(cli("server", "--data-dir", str(data.root), "clients", "list", "--json").out)
    assert [c["client_id"] for c in listed] == [client.client_id]
    assert cli("server", "--data-dir", str(data.root), "clients", "revoke", client.client_id).code == 0
    assert store.verify(client.credential) is None


def test_web_access_create_list_revoke(cli: CliRunner, tmp_path: Path) -> None:
    root = str(tmp_path / "srv")
    created = json.loads(
        cli("server", "--data-dir", root, "web-access", "create", "--json", "--scopes", "context:read").out
    )
    assert created["scopes"] == ["context:read"]
    listed = cli("server", "--data-dir", root, "web-access", "list", "--json")
    assert created["code"] not in listed.out and json.loads(listed.out)[0]["status"] == "open"
    assert cli("server", "--data-dir", root, "web-access", "revoke", created["id"]).code == 0
    assert (
        json.loads(cli("server", "--data-dir", root, "web-access", "list", "--json").out)[0]["status"]
        == "revoked"
    )


def test_skill_export_writes_a_deterministic_zip_with_the_skill(cli: CliRunner, tmp_path: Path) -> None:
    out = cli("server", "skill", "export", str(tmp_path / "dist"), "--json")
    assert out.code == 0, out.err
    path = Path(json.loads(out.out)["path"])
    assert path.name == "ivoai-memory-context.zip"
    with zipfile.ZipFile(path) as zf:
        assert zf.namelist() == ["ivoai-memory-context/SKILL.md"]
        text = zf.read("ivoai-memory-context/SKILL.md").decode()
    assert text.startswith("---\nname: ivoai-memory-context\n")
    first = path.read_bytes()
    cli("server", "skill", "export", str(tmp_path / "dist"))
    assert path.read_bytes() == first


def test_start_refuses_plaintext_on_a_public_address(tmp_path: Path) -> None:
    result = run_ivoai(
        "server", "--data-dir", str(tmp_path / "srv"), "start", "--listen", "0.0.0.0:0", timeout=60
    )
    assert result.returncode == 1
    assert "refusing plaintext HTTP on non-loopback address 0.0.0.0" in result.stderr
    assert "Traceback" not in result.stderr


def test_start_serves_until_sigterm_and_status_sees_it_ready(tmp_path: Path, cli: CliRunner) -> None:
    root = tmp_path / "srv"
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ivoai",
            "server",
            "--data-dir",
            str(root),
            "start",
            "--listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stderr is not None
            # Blocks until the server announces itself (bounded by the test timeout); a fresh data dir
            # is initialized first, which is said on the line before.
            first = proc.stderr.readline()
            assert f"initialized server data directory {root}" in first, first
            line = proc.stderr.readline()
            assert "ivoai server listening on 127.0.0.1:" in line, line
            status = json.loads(cli("server", "--data-dir", str(root), "status", "--json").out)
            assert status["running"] is True and status["pid"] == proc.pid
            assert status["health"]["status_code"] == 200
            assert status["ready"]["body"]["status"] in ("ready", "ready_degraded")
            human = cli("server", "--data-dir", str(root), "status").out
            assert f"running: yes, pid {proc.pid} at http://127.0.0.1:" in human
            assert "health: ok\n" in human and "ready: ready" in human and "{" not in human
        finally:
            proc.send_signal(signal.SIGTERM)
            rest = proc.communicate(timeout=30)[1]
    assert proc.returncode == 0, rest
    assert "ivoai server stopped" in rest
    after = json.loads(cli("server", "--data-dir", str(root), "status", "--json").out)
    assert after["running"] is False


def test_status_of_a_missing_data_dir_reports_uninitialized_without_creating_it(
    cli: CliRunner, tmp_path: Path
) -> None:
    root = tmp_path / "nothing-here"
    status = json.loads(cli("server", "--data-dir", str(root), "status", "--json").out)
    assert status["initialized"] is False and status["running"] is False
    human = cli("server", "--data-dir", str(root), "status")
    assert human.code == 0
    assert f"initialized: no (`{ivoai_command()} server --data-dir {root} init` creates it" in human.out
    assert not root.exists()


def test_a_command_before_init_initializes_the_data_dir_says_so_and_status_agrees(
    cli: CliRunner, tmp_path: Path
) -> None:
    root = tmp_path / "srv"
    first = cli("server", "--data-dir", str(root), "enrollment", "list", "--json")
    assert first.code == 0, first.err
    assert f"initialized server data directory {root} with defaults" in first.err
    assert (root / "config.toml").is_file()
    status = json.loads(cli("server", "--data-dir", str(root), "status", "--json").out)
    assert status["initialized"] is True
    again = cli("server", "--data-dir", str(root), "memory", "status", "--json")
    assert again.code == 0 and "initialized" not in again.err  # said once, when it happened


def test_status_prints_readable_lines_without_python_reprs(cli: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "srv"
    assert cli("server", "--data-dir", str(root), "init").code == 0
    human = cli("server", "--data-dir", str(root), "status")
    assert human.code == 0, human.err
    lines = dict(line.split(": ", 1) for line in human.out.splitlines())
    assert lines["initialized"] == "yes"
    assert lines["listen"] == "127.0.0.1:7744"
    assert lines["tls"] == "off" and lines["trusted proxies"] == "none"
    assert lines["running"] == f"no (`{ivoai_command()} server --data-dir {root} start` runs it)"
    assert lines["web access"] == "0 grant(s), 0 open activation code(s), 0 registered client(s)"
    assert not any(c in human.out for c in "{}[]'")


def test_a_bad_listen_in_config_toml_names_the_file_and_key(cli: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "srv"
    assert cli("server", "--data-dir", str(root), "init").code == 0
    config = root / "config.toml"
    config.write_text(config.read_text().replace('listen = "127.0.0.1:7744"', 'listen = "localhost"'))
    for args in (("status",), ("start",)):
        result = cli("server", "--data-dir", str(root), *args)
        assert result.code == 1, args
        assert f"{config}: server.listen: expected HOST:PORT" in result.err, result.err
        assert "--listen" not in result.err
    # The option keeps naming itself.
    bad = cli("server", "--data-dir", str(tmp_path / "other"), "start", "--listen", "nope")
    assert bad.code == 1 and "--listen: expected HOST:PORT" in bad.err


def test_init_mode_selects_the_context_backends_and_keeps_other_settings(
    cli: CliRunner, tmp_path: Path
) -> None:
    root = str(tmp_path / "srv")
    first = json.loads(
        cli("server", "--data-dir", root, "init", "--json", "--public-url", "https://ai.example.com").out
    )
    assert first["context"] == {"embedder": "builtin", "index": "edge"}
    services = json.loads(cli("server", "--data-dir", root, "init", "--mode", "services", "--json").out)
    assert services["context"] == {"embedder": "tei", "index": "qdrant"}
    assert services["public_url"] == "https://ai.example.com"
    bad = cli("server", "--data-dir", root, "init", "--mode", "cloud")
    assert bad.code == 1 and "--mode: expected one of embedded, services" in bad.err
