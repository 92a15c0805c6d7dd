"""The worker pool (cap, queue, wait, cancel) and the user-wide launch fuse shared across processes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ivoai.client.orchestration._errors import FuseOpenError, OrchestrationUsageError
from ivoai.client.orchestration._fuse import FuseLimits, LaunchFuse
from ivoai.client.orchestration._pool import WorkerPool
from ivoai.client.sessions.procinfo import start_marker
from ivoai.common.paths import XdgPaths, xdg_paths
from tests.client.orchestration.support import codex_standin
from tests.client.orchestration.workers import alive, git_tree, spec, wait_for, worker_io

HOLD = {"exec": {"events": [{"type": "thread.started", "thread_id": "t"}], "hold": True}}


def test_three_workers_run_at_the_cap_and_a_fourth_waits_in_the_queue(xdg: XdgPaths, tmp_path: Path) -> None:
    tree = git_tree(tmp_path / "repo")
    codex_standin(xdg, HOLD)
    pool = WorkerPool(worker_io(xdg, tmp_path), LaunchFuse(xdg), concurrency=3)
    try:
        entries = [pool.submit(spec(tree, worker_id=f"wrk_{i}", task_id=f"t{i}")) for i in range(4)]
        wait_for(lambda: sum(e.state == "running" and e.control.pid is not None for e in entries) == 3)
        assert entries[3].state == "queued"
        _, timed_out = pool.wait([entries[3].id], mode="any", timeout=0.2)
        assert timed_out
        pool.cancel(entries[0].id)
        done, timed_out = pool.wait([entries[0].id], mode="all", timeout=30)
        assert not timed_out and done[0].state == "cancelled"
        fourth = entries[3]
        wait_for(lambda: str(fourth.state) == "running")
        assert LaunchFuse(xdg).status()["active"] == 3
    finally:
        pool.close()
    assert all(e.done for e in entries)
    assert all(not alive(e.control.pid) for e in entries if e.control.pid)
    assert LaunchFuse(xdg).status()["active"] == 0


def test_more_than_three_concurrent_workers_is_refused() -> None:
    with pytest.raises(OrchestrationUsageError, match="1-3"):
        WorkerPool(None, None, concurrency=4)  # type: ignore[arg-type]


def test_wait_all_returns_when_every_worker_finished(xdg: XdgPaths, tmp_path: Path) -> None:
    tree = git_tree(tmp_path / "repo")
    codex_standin(
        xdg,
        {
            "exec": {
                "events": [{"type": "turn.completed", "usage": {}}],
                "last_message": '{"summary": "ok", "findings": [], "state_delta": {}}',
            }
        },
    )
    pool = WorkerPool(worker_io(xdg, tmp_path), LaunchFuse(xdg), concurrency=2)
    try:
        ids = [pool.submit(spec(tree, worker_id=f"wrk_{i}")).id for i in range(3)]
        entries, timed_out = pool.wait(ids, mode="all", timeout=60)
        assert not timed_out and [e.state for e in entries] == ["succeeded"] * 3
    finally:
        pool.close()


def test_a_queued_worker_cancelled_never_starts(xdg: XdgPaths, tmp_path: Path) -> None:
    tree = git_tree(tmp_path / "repo")
    home = codex_standin(xdg, HOLD)
    pool = WorkerPool(worker_io(xdg, tmp_path), LaunchFuse(xdg), concurrency=1)
    try:
        first = pool.submit(spec(tree, worker_id="wrk_a"))
        second = pool.submit(spec(tree, worker_id="wrk_b"))
        log = home / "ivoai-standin-requests.jsonl"
        wait_for(lambda: log.exists() and "exec_argv" in log.read_text())
        pool.cancel(second.id)
        assert second.state == "cancelled" and second.report is not None
        pool.cancel(first.id)
        pool.wait([first.id], mode="all", timeout=30)
    finally:
        pool.close()
    runs = [
        line
        for line in (home / "ivoai-standin-requests.jsonl").read_text().splitlines()
        if "exec_argv" in line
    ]
    assert len(runs) == 1


def test_the_fuse_breaker_stops_a_vendor_for_an_hour_with_the_reason(xdg: XdgPaths) -> None:
    fuse = LaunchFuse(xdg)
    until = fuse.trip("codex", "rate_limit_reached (confirmed)", now=1000.0)
    assert until == 1000.0 + 3600
    with pytest.raises(FuseOpenError, match="stopped until") as info:
        fuse.acquire("codex", session_id="s", worker_id="w1", now=1001.0)
    assert info.value.retry_at == until
    fuse.acquire("claude", session_id="s", worker_id="w2", now=1001.0).release()  # the other vendor runs
    fuse.acquire("codex", session_id="s", worker_id="w3", now=until + 1).release()


def test_the_hourly_launch_limit_stops_a_runaway_loop(xdg: XdgPaths) -> None:
    fuse = LaunchFuse(xdg, FuseLimits(concurrent=10, per_hour=3))
    for i in range(3):
        fuse.acquire("codex", session_id="s", worker_id=f"w{i}", now=100.0 + i).release()
    with pytest.raises(FuseOpenError, match="3 worker launches in the last hour") as info:
        fuse.acquire("codex", session_id="s", worker_id="w9", now=200.0)
    assert info.value.retry_at == 100.0 + 3600
    fuse.acquire("codex", session_id="s", worker_id="w10", now=100.0 + 3601).release()


def _hold_slots(state: str, ready: str, n: int) -> None:
    """Another ivoai process: take `n` launch slots, say so, and keep them until killed."""
    os.environ["XDG_STATE_HOME"] = state
    fuse = LaunchFuse(xdg_paths(), FuseLimits(concurrent=3))
    tickets = [fuse.acquire("codex", session_id="ses_other", worker_id=f"other{i}") for i in range(n)]
    Path(ready).write_text(str(len(tickets)))
    time.sleep(120)


def test_two_ivoai_processes_share_the_launch_fuse(xdg: XdgPaths, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    ctx = multiprocessing.get_context("spawn")
    other = ctx.Process(target=_hold_slots, args=(os.environ["XDG_STATE_HOME"], str(ready), 2))
    other.start()
    try:
        wait_for(ready.exists)
        mine = LaunchFuse(xdg, FuseLimits(concurrent=3))
        ticket = mine.acquire("codex", session_id="ses_me", worker_id="mine1")
        with pytest.raises(FuseOpenError, match="3 worker launches already run for this user"):
            mine.acquire("codex", session_id="ses_me", worker_id="mine2")
        ticket.release()
        other.kill()  # the other process dies without releasing: its entries are pruned
        other.join(30)
        tickets = [mine.acquire("codex", session_id="ses_me", worker_id=f"again{i}") for i in range(3)]
        for t in tickets:
            t.release()
    finally:
        if other.is_alive():
            other.kill()
            other.join(30)


def _orphan_owner(state: str, ready: str) -> None:
    """An ivoai process that launched a worker (in its own group, with a grandchild) and then dies."""
    os.environ["XDG_STATE_HOME"] = state
    fuse = LaunchFuse(xdg_paths())
    ticket = fuse.acquire("codex", session_id="ses_dead", worker_id="orphan")
    code = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)"
    )
    worker = subprocess.Popen([sys.executable, "-c", code], process_group=0)
    ticket.bind(worker.pid)
    Path(ready).write_text(str(worker.pid))
    time.sleep(120)


def test_orphans_of_a_dead_ivoai_process_are_reaped_on_the_next_start(xdg: XdgPaths, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    ctx = multiprocessing.get_context("spawn")
    owner = ctx.Process(target=_orphan_owner, args=(os.environ["XDG_STATE_HOME"], str(ready)))
    owner.start()
    wait_for(ready.exists)
    orphan = int(ready.read_text())
    marker = start_marker(orphan)
    members: list[int] = []
    wait_for(lambda: len(_group(orphan)) >= 2)
    members = _group(orphan)
    os.kill(owner.pid, signal.SIGKILL)  # type: ignore[arg-type]
    owner.join(30)
    assert start_marker(orphan) == marker  # still running, owned by nobody
    LaunchFuse(xdg).acquire("claude", session_id="ses_new", worker_id="fresh").release()
    wait_for(lambda: not any(alive(p) for p in members))


def _group(pgid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != b"Z":
                out.append(int(entry))
    return out
