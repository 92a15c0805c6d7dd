"""Caveman lifecycle through `ivoai codex|claude|opencode`, against the caveman-proxy stand-in.

The pinned caveman-proxy asset cannot be fetched here; `caveman_standin.py` speaks its
`version --json` and `/health/ready` contract (see its docstring). The pin is replaced for the
stand-in through the documented test hook IVOAI_TEST_CAVEMAN_SHA256.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ivoai.client.compression import caveman
from ivoai.client.compression.errors import PreflightError
from ivoai.common.paths import XdgPaths
from tests.client.agents.standins import (
    CAVEMAN_SCRIPT,
    finish,
    install_caveman,
    install_client,
    reports,
    start_ivoai,
    wait_for,
    wait_line,
)
from tests.conftest import run_ivoai


def _env(tmp_path: Path, digest: str | None, mode: str = "exit:0", **extra: str) -> dict[str, str]:
    env = dict(
        os.environ,
        STANDIN_REPORT=str(tmp_path / "report.ndjson"),
        STANDIN_MODE=mode,
        STANDIN_ENV_KEYS="ANTHROPIC_BASE_URL,ANTHROPIC_API_KEY,ANTHROPIC_AUTH_TOKEN",
        **extra,
    )
    if digest is not None:
        env[caveman.TEST_PIN_ENV] = digest
    return env


def _proxy_url(argv: list[str]) -> str:
    for arg in argv:
        match = re.fullmatch(
            r'model_providers\.ivoai-caveman\.base_url="(http://127\.0\.0\.1:\d+)/chatgpt"', arg
        )
        if match:
            return match.group(1)
    raise AssertionError(f"no caveman provider in {argv}")


def _port_closed(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as sock:
        return sock.connect_ex((host, int(port))) != 0


def _record(xdg: XdgPaths) -> dict[str, object]:
    [path] = list(xdg.sessions_dir.glob("ses_*.json"))
    doc: dict[str, object] = json.loads(path.read_text())
    return doc


def _runtime_empty(xdg: XdgPaths) -> bool:
    run = xdg.state / "run"
    return not run.exists() or not any(run.iterdir())


def test_codex_runs_behind_a_healthy_proxy_on_a_process_local_provider(xdg: XdgPaths, tmp_path: Path) -> None:
    digest = install_caveman(xdg)
    install_client(xdg, "codex")
    result = run_ivoai("codex", "--", "exec", "hi", env=_env(tmp_path, digest))
    assert result.returncode == 0, result.stderr
    assert "IVOAI_TEST_CAVEMAN_SHA256 replaces the pinned caveman-proxy digest" in result.stderr
    [start] = reports(tmp_path / "report.ndjson")
    url = _proxy_url(start["argv"])
    assert 'model_provider="ivoai-caveman"' in start["argv"]
    assert "model_providers.ivoai-caveman.requires_openai_auth=true" in start["argv"]
    assert start["argv"][-2:] == ["exec", "hi"]
    record = _record(xdg)
    assert record["requested_provider"] == record["effective_provider"] == "caveman"
    assert record["bypass"] is False and record["fallback"] is False
    assert _port_closed(url), "the proxy outlived the session"
    assert _runtime_empty(xdg), "the session runtime was not removed"


def test_claude_gets_only_its_base_url_and_no_synthetic_token(xdg: XdgPaths, tmp_path: Path) -> None:
    digest = install_caveman(xdg)
    install_client(xdg, "claude")
    result = run_ivoai("claude", env=_env(tmp_path, digest))
    assert result.returncode == 0, result.stderr
    [start] = reports(tmp_path / "report.ndjson")
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", start["env"]["ANTHROPIC_BASE_URL"])
    assert start["env"]["ANTHROPIC_API_KEY"] is None and start["env"]["ANTHROPIC_AUTH_TOKEN"] is None
    assert start["argv"] == []


def test_a_binary_that_does_not_match_the_pin_is_not_run_and_the_client_runs_direct_once(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    install_caveman(xdg)
    install_client(xdg, "codex")
    result = run_ivoai("codex", env=_env(tmp_path, None))
    assert result.returncode == 0, result.stderr
    assert "caveman unavailable (caveman_digest_mismatch)" in result.stderr
    [start] = reports(tmp_path / "report.ndjson")
    assert not any("ivoai-caveman" in a for a in start["argv"])
    record = _record(xdg)
    assert record["effective_provider"] == "direct" and record["bypass_reason"] == "caveman_digest_mismatch"


def test_opencode_fails_the_caveman_preflight_and_runs_direct_exactly_once(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    digest = install_caveman(xdg)
    install_client(xdg, "opencode")
    result = run_ivoai("opencode", env=_env(tmp_path, digest))
    assert result.returncode == 0, result.stderr
    assert len(reports(tmp_path / "report.ndjson")) == 1
    record = _record(xdg)
    assert record["requested_provider"] == "caveman" and record["effective_provider"] == "direct"
    assert record["bypass_reason"] == "executor_direct_only" and record["fallback"] is True


def test_proxy_death_mid_session_ends_that_session_and_is_reported(xdg: XdgPaths, tmp_path: Path) -> None:
    digest = install_caveman(xdg)
    install_client(xdg, "codex")
    proc = start_ivoai("codex", env=_env(tmp_path, digest, mode="trap"))
    try:
        wait_line(proc, "ready")
        url = _proxy_url(reports(tmp_path / "report.ndjson")[0]["argv"])
        with urllib.request.urlopen(f"{url}/_standin/exit", timeout=10) as resp:
            assert resp.status == 200
    finally:
        code, _, err = finish(proc)
    assert code == 128 + signal.SIGTERM  # the client was ended with TERM, and its status propagated
    assert "the caveman proxy exited (status 3)" in err and "is not restarted" in err
    starts = [e for e in reports(tmp_path / "report.ndjson") if "argv" in e]
    assert len(starts) == 1, "a second session was started"
    record = _record(xdg)
    assert record["state"] == "ended" and record["end_reason"] == "helper_died"
    assert _runtime_empty(xdg)


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_stops_the_proxy_and_removes_its_runtime(
    xdg: XdgPaths, tmp_path: Path, signo: signal.Signals
) -> None:
    digest = install_caveman(xdg)
    install_client(xdg, "codex")
    proc = start_ivoai("codex", env=_env(tmp_path, digest, mode="trap"))
    try:
        wait_line(proc, "ready")
        url = _proxy_url(reports(tmp_path / "report.ndjson")[0]["argv"])
        assert not _port_closed(url)
        assert not _runtime_empty(xdg)
        proc.send_signal(signo)
    finally:
        code, _, err = finish(proc)
    assert code == 128 + signo, err
    assert _port_closed(url)
    assert _runtime_empty(xdg)


def _spawn_standin(home: Path, port: int, *, config_mode: int = 0o600) -> subprocess.Popen[bytes]:
    home.mkdir(mode=0o700, parents=True)
    home.chmod(0o700)
    config = home / "caveman.yaml"
    caveman.write_config(str(config), port)
    config.chmod(config_mode)
    env = {"PATH": "/usr/bin:/bin", "CAVEMAN_HOME": str(home), "CAVEMAN_CONFIG": str(config)}
    return subprocess.Popen(  # its own process group, as ivoai starts it
        [sys.executable, str(CAVEMAN_SCRIPT), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        process_group=0,
    )


def test_health_wait_is_bounded_when_the_proxy_never_becomes_ready(tmp_path: Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir()
    (runtime / "standin-delay").write_text("600")
    port = caveman.free_loopback_port()
    proc = _spawn_standin(runtime / "caveman" / "proxy-x", port)
    try:
        wait_for(
            lambda: not _port_closed(f"http://127.0.0.1:{port}") or proc.poll() is not None,
            what="a listening stand-in",
        )
        with pytest.raises(PreflightError) as info:
            caveman.wait_ready(port, proc.pid, timeout=0.3)
        assert info.value.code == "caveman_health_timeout"
    finally:
        proc.kill()
        proc.wait()


def test_a_proxy_that_exits_at_start_is_reported_as_such(tmp_path: Path) -> None:
    port = caveman.free_loopback_port()
    proc = _spawn_standin(tmp_path / "caveman" / "proxy-x", port, config_mode=0o644)
    with pytest.raises(PreflightError) as info:
        caveman.wait_ready(port, proc.pid, timeout=60)
    assert info.value.code == "caveman_exited"
    proc.wait()


def test_a_proxy_orphaned_by_a_killed_ivoai_is_stopped_and_its_runtime_removed_on_the_next_launch(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    from ivoai.client.sessions.procinfo import start_marker
    from ivoai.client.sessions.records import SessionRecord, SessionStore, new_session_id

    digest = install_caveman(xdg)
    install_client(xdg, "codex")
    # What `kill -9 <ivoai>` leaves behind: a running proxy in its own group, its runtime, a record.
    lost_id = new_session_id()
    (xdg.state / "run").mkdir(parents=True, mode=0o700)
    xdg.state.chmod(0o700)
    runtime = xdg.state / "run" / lost_id
    port = caveman.free_loopback_port()
    proxy = _spawn_standin(runtime / "caveman" / "proxy-x", port)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_marker = start_marker(dead.pid)
    dead.wait()
    try:
        wait_for(lambda: not _port_closed(f"http://127.0.0.1:{port}"), what="the orphan proxy")
        SessionStore(xdg).write(
            SessionRecord(
                id=lost_id,
                executor="codex",
                pid=dead.pid,
                pid_start=dead_marker or "1",
                started_at=1.0,
                requested_provider="caveman",
                effective_provider="caveman",
                provider_source="default",
                helper_pid=proxy.pid,
                helper_start=start_marker(proxy.pid),
            )
        )
        result = run_ivoai("codex", env=_env(tmp_path, digest))
        assert result.returncode == 0, result.stderr
        assert f"stopped the orphaned compression proxy of lost session {lost_id}" in result.stderr
        assert proxy.wait(timeout=60) != 0
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait()
    assert not runtime.exists()
    lost = SessionStore(xdg).load(lost_id)
    assert lost.state == "ended" and lost.end_reason == "lost"


def test_an_unusable_runtime_directory_falls_back_to_direct_before_the_client_starts(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    digest = install_caveman(xdg)
    install_client(xdg, "codex")
    xdg.state.mkdir(parents=True, mode=0o700, exist_ok=True)
    xdg.state.chmod(0o700)
    (xdg.state / "run").write_text("not a directory")
    result = run_ivoai("codex", env=_env(tmp_path, digest))
    assert result.returncode == 0, result.stderr
    assert "caveman unavailable (caveman_runtime_failed)" in result.stderr
    assert len(reports(tmp_path / "report.ndjson")) == 1
    assert _record(xdg)["effective_provider"] == "direct"
