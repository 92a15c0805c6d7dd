"""Signals: a real child that traps them proves forwarding, exit codes (128+N) and group membership."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ivoai.common.paths import XdgPaths
from tests.client.agents.standins import finish, install_client, reports, start_ivoai, wait_line


def _env(tmp_path: Path, mode: str) -> dict[str, str]:
    return dict(os.environ, STANDIN_REPORT=str(tmp_path / "report.ndjson"), STANDIN_MODE=mode)


@pytest.mark.parametrize("signo", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_sent_to_ivoai_reaches_the_client_once_and_its_death_is_128_plus_n(
    xdg: XdgPaths, tmp_path: Path, signo: signal.Signals
) -> None:
    install_client(xdg, "codex")
    proc = start_ivoai("codex", "--direct", env=_env(tmp_path, "trap"))
    try:
        wait_line(proc, "ready")
        proc.send_signal(signo)
    finally:
        code, _, err = finish(proc)
    assert code == 128 + signo, err
    events = reports(tmp_path / "report.ndjson")
    assert [e["signal"] for e in events if "signal" in e] == [signo]


def test_the_client_stays_in_ivoais_foreground_process_group(xdg: XdgPaths, tmp_path: Path) -> None:
    install_client(xdg, "claude")
    proc = start_ivoai("claude", "--direct", env=_env(tmp_path, "exit:0"))
    assert finish(proc)[0] == 0
    [start] = reports(tmp_path / "report.ndjson")
    assert start["pgid"] == os.getpgid(0)  # ivoai inherited our group and kept the client in it


def test_a_client_killed_by_a_signal_yields_128_plus_n(xdg: XdgPaths, tmp_path: Path) -> None:
    install_client(xdg, "codex")
    proc = start_ivoai("codex", "--direct", env=_env(tmp_path, f"suicide:{int(signal.SIGKILL)}"))
    assert finish(proc)[0] == 128 + signal.SIGKILL


def test_a_client_that_ignores_sigterm_is_killed_after_the_grace_period(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    """Bounded TERM -> KILL: SIGTERM to ivoai ends the session even if the client ignores it."""
    install_client(xdg, "codex")
    proc = start_ivoai("codex", "--direct", env=_env(tmp_path, "wait") | {"STANDIN_IGNORE_TERM": "1"})
    try:
        wait_line(proc, "ready")
        proc.send_signal(signal.SIGTERM)
    finally:
        code, _, err = finish(proc)
    assert code == 128 + signal.SIGKILL, err
