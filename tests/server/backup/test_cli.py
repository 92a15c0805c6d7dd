"""`ivoai server backup|restore` from the command line, including a real running gateway."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2

from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory.service import MemoryService
from ivoai.server.runtime.runstate import read_run_state
from tests.conftest import CliRunner


def _seed(cli: CliRunner, root: Path) -> None:
    assert cli("server", "--data-dir", str(root), "init").code == 0
    with MemoryService.open(ServerDataDir(root)) as svc:
        svc.memory_write_page("w", "p", "a.md", "backed up")


def test_backup_list_verify_and_dry_run_restore_with_json(cli: CliRunner, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _seed(cli, src)
    r = cli("server", "--data-dir", str(src), "backup", "--json")
    assert r.code == 0, r.err
    made = json.loads(r.out)
    assert {f["path"] for f in made["files"]} == {"config.toml", "memory/memory.sqlite3"}
    assert made["format_version"] == 1 and made["schema_versions"]["memory"] >= 1

    listed = json.loads(cli("server", "--data-dir", str(src), "backup", "list", "--json").out)
    assert [b["archive"] for b in listed] == [made["archive"]] and listed[0]["valid"] is True

    v = cli("server", "backup", "verify", made["archive"], "--json")
    assert v.code == 0 and json.loads(v.out)["ok"] is True

    d = cli("server", "--data-dir", str(dst), "restore", made["archive"], "--dry-run", "--json")
    assert d.code == 0, d.err
    assert json.loads(d.out)["dry_run"] is True
    assert not (dst / "memory" / "memory.sqlite3").exists()

    bad = cli("server", "--data-dir", str(dst), "restore", "relative/archive.tar")
    assert bad.code == 1 and "absolute local path" in bad.err and "Traceback" not in bad.err


def test_restore_refuses_while_a_gateway_serves_and_stop_gateway_restarts_it(
    cli: CliRunner, tmp_path: Path
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _seed(cli, src)
    archive = json.loads(cli("server", "--data-dir", str(src), "backup", "--json").out)["archive"]
    assert cli("server", "--data-dir", str(dst), "init").code == 0

    gateway = subprocess.Popen(
        [sys.executable, "-m", "ivoai", "server", "--data-dir", str(dst), "start", "--listen", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    restarted: int | None = None
    try:
        assert gateway.stderr is not None
        assert "listening on" in gateway.stderr.readline()  # announced after the run file is written
        state = read_run_state(ServerDataDir(dst))
        assert state is not None and state.pid == gateway.pid

        refused = cli("server", "--data-dir", str(dst), "restore", archive)
        assert refused.code == 1 and f"pid {gateway.pid}" in refused.err and "--stop-gateway" in refused.err
        assert not (dst / "memory" / "memory.sqlite3").exists() or _pages(dst) == 0

        done = cli("server", "--data-dir", str(dst), "restore", archive, "--stop-gateway", "--json")
        assert done.code == 0, done.err
        report = json.loads(done.out)
        assert report["gateway"]["stopped"] is True and report["gateway"]["restarted"] is True
        assert gateway.wait(timeout=30) == 0  # the old gateway shut down gracefully
        restarted = report["gateway"]["new_pid"]
        new_state = read_run_state(ServerDataDir(dst))
        assert new_state is not None and new_state.pid == restarted
        assert new_state.listen == state.listen  # same address as before
        assert httpx2.get(state.base_url + "/health", timeout=10).status_code == 200
        assert _pages(dst) == 1
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait()
        if gateway.stderr is not None:
            gateway.stderr.close()
        if restarted is not None:
            os.kill(restarted, signal.SIGTERM)
            _wait_gone(restarted)


def _pages(root: Path) -> int:
    with MemoryService.open(ServerDataDir(root)) as svc:
        return svc.memory_status().pages


def _wait_gone(pid: int) -> None:
    """Wait (bounded) for a process that is not our child to exit, via a pidfd."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        import select

        select.select([fd], [], [], 30)
    finally:
        os.close(fd)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # restarted by the in-process CLI, so a child of this test: reap it
