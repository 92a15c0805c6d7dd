"""Signals: a real child that traps them proves forwarding, exit codes (128+N) and group membership."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ivoai.common.paths import XdgPaths
from tests.client.agents.standins import finish, install_client, reports, start_ivoai, wait_for, wait_line


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


def test_the_client_starts_with_default_sigpipe_although_python_ignores_it(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    out = tmp_path / "sigign"
    client = xdg.data / "bin" / "opencode"
    client.parent.mkdir(parents=True, mode=0o700)
    client.write_text(f'#!/bin/sh\ngrep SigIgn /proc/$$/status > "{out}"\n')  # sh does not ignore SIGPIPE
    client.chmod(0o755)
    proc = start_ivoai("opencode", "--direct")
    assert finish(proc)[0] == 0
    ignored = int(out.read_text().split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1))


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


def test_a_terminal_ctrl_c_reaches_the_client_once_and_is_not_forwarded_again(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    """Ctrl-C on a real pseudo-terminal: the kernel signals the whole foreground group (ivoai and the
    client); ivoai must not forward it a second time. A later kill(2) SIGTERM is still forwarded."""
    install_client(xdg, "codex")
    report = tmp_path / "report.ndjson"
    master, slave = pty.openpty()
    slave_name = os.ttyname(slave)
    os.close(slave)
    # Become a session leader, acquire the pty as controlling terminal (we are then its foreground
    # group), and exec ivoai exactly as a shell would run it in the foreground.
    boot = (
        "import os, sys; os.setsid(); fd = os.open(sys.argv[1], os.O_RDWR); "
        "[os.dup2(fd, i) for i in (0, 1, 2)]; "
        "os.execv(sys.executable, [sys.executable, '-m', 'ivoai', 'codex', '--direct'])"
    )
    env = dict(os.environ, STANDIN_REPORT=str(report), STANDIN_MODE="count")
    proc = subprocess.Popen(
        [sys.executable, "-c", boot, slave_name],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: any("argv" in e for e in reports(report)), what="the client to start")
        wait_for(lambda: _drain(master) and "ready" in _seen, what="the client's ready line")
        os.write(master, b"\x03")  # the terminal's interrupt character
        wait_for(lambda: any("signal" in e for e in reports(report)), what="the client to see SIGINT")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    seen = [(e["signal"], e["si_code"]) for e in reports(report) if "signal" in e]
    assert seen == [(signal.SIGINT, SI_KERNEL), (signal.SIGTERM, SI_USER)]
    assert code == 128 + signal.SIGTERM


SI_KERNEL = 0x80  # sent by the kernel (here: the terminal driver)
SI_USER = 0  # sent with kill(2) (here: forwarded by ivoai)
_seen = ""


def _drain(fd: int) -> bool:
    """Read what the pty has (ivoai's and the client's output) so writes never block."""
    global _seen
    while select.select([fd], [], [], 0)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return True
        if not chunk:
            break
        _seen += chunk.decode("utf-8", "replace")
    return True
