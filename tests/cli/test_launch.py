"""`ivoai codex|claude|opencode` against the real official clients (npm) where their behaviour matters."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from ivoai.common.paths import XdgPaths
from tests.client.agents.standins import install_client, reports
from tests.conftest import run_ivoai, tool_path


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{tool_path('codex').parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env.update(extra)
    return env


def _sessions(xdg: XdgPaths) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(xdg.sessions_dir.glob("ses_*.json"))]


def test_direct_codex_version_prints_the_real_version_and_records_an_ended_session(xdg: XdgPaths) -> None:
    real = subprocess.run(
        [str(tool_path("codex")), "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    result = run_ivoai("codex", "--direct", "--", "--version", env=_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout == real.stdout
    assert result.stdout.startswith("codex-cli ")
    [record] = _sessions(xdg)
    assert record["state"] == "ended" and record["exit_code"] == 0
    assert record["requested_provider"] == record["effective_provider"] == "direct"
    assert record["provider_source"] == "flag"
    assert "--version" not in json.dumps(record)  # client arguments are never recorded
    mode = (xdg.sessions_dir / f"{record['id']}.json").stat().st_mode & 0o777
    assert mode == 0o600


def test_codex_login_status_exits_1_like_the_client_and_the_status_is_propagated(xdg: XdgPaths) -> None:
    result = run_ivoai("codex", "--", "login", "status", env=_env())
    assert result.returncode == 1
    assert "Not logged in" in result.stdout + result.stderr
    [record] = _sessions(xdg)
    assert record["exit_code"] == 1


def test_default_config_requests_caveman_and_falls_back_to_direct_once_when_it_is_missing(
    xdg: XdgPaths,
) -> None:
    result = run_ivoai("claude", "--", "--version", env=_env())
    assert result.returncode == 0, result.stderr
    assert "(Claude Code)" in result.stdout
    assert "caveman unavailable (caveman_not_installed)" in result.stderr
    [record] = _sessions(xdg)
    assert record["requested_provider"] == "caveman" and record["provider_source"] == "default"
    assert record["effective_provider"] == "direct"
    assert record["fallback"] is True and record["bypass_reason"] == "caveman_not_installed"


def test_claude_auth_status_exit_code_passes_through(xdg: XdgPaths) -> None:
    result = run_ivoai("claude", "--direct", "--", "auth", "status", env=_env())
    assert result.returncode == 1
    assert json.loads(result.stdout)["loggedIn"] is False


def test_payg_keys_in_the_parent_never_reach_the_client(xdg: XdgPaths, tmp_path: Path) -> None:
    install_client(xdg, "codex")
    report = tmp_path / "report.ndjson"
    env = _env(
        OPENAI_API_KEY="sk-proj-" + "a" * 40,
        ANTHROPIC_API_KEY="sk-ant-" + "b" * 40,
        STANDIN_REPORT=str(report),
        STANDIN_ENV_KEYS="OPENAI_API_KEY,ANTHROPIC_API_KEY,IVOAI_SESSION_ID,HOME",
    )
    result = run_ivoai("codex", "--direct", env=env)
    assert result.returncode == 0, result.stderr
    [start] = reports(report)
    assert start["env"]["OPENAI_API_KEY"] is None and start["env"]["ANTHROPIC_API_KEY"] is None
    assert start["env"]["HOME"] == env["HOME"]
    assert str(start["env"]["IVOAI_SESSION_ID"]).startswith("ses_")
    assert "not passing ANTHROPIC_API_KEY, OPENAI_API_KEY to codex" in result.stderr
    assert "sk-" not in result.stderr


def test_client_exit_status_is_propagated_and_a_failed_client_is_not_started_again(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    install_client(xdg, "opencode")
    report = tmp_path / "report.ndjson"
    result = run_ivoai(
        "opencode", "--", "run", "x", env=_env(STANDIN_REPORT=str(report), STANDIN_MODE="exit:7")
    )
    assert result.returncode == 7
    [start] = reports(report)  # exactly one start
    assert start["argv"] == ["run", "x"]


def test_missing_client_is_a_clear_error_with_an_install_hint(xdg: XdgPaths) -> None:
    env = _env()
    env["PATH"] = "/usr/bin:/bin"
    result = run_ivoai("opencode", "--direct", env=env)
    assert result.returncode == 1
    assert "opencode is not installed" in result.stderr
    assert "npm install -g opencode-ai" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_launch_option_exits_2_without_starting_anything(xdg: XdgPaths) -> None:
    result = run_ivoai("codex", "--model", "o3", env=_env())
    assert result.returncode == 2
    assert "put the client's own options after `--`" in result.stderr
    assert not xdg.sessions_dir.exists() or not list(xdg.sessions_dir.iterdir())


def test_launch_help_is_ivoais_own(xdg: XdgPaths) -> None:
    result = run_ivoai("claude", "--help", env=_env())
    assert result.returncode == 0
    assert "--knowledge-source S" in result.stdout
