"""ArtifactStore with real concurrent processes: quotas under contention and SIGKILL mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from ivoai.client.workingcontext import ArtifactStore
from ivoai.common.limits import MIB, SESSION_STORE_MAX_BYTES, SESSION_STORE_MAX_OBJECTS
from ivoai.common.paths import XdgPaths

CHILD = Path(__file__).with_name("_child.py")
WAIT_SECONDS = 120


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )


def _fill_concurrently(size: int, session: str) -> list[int]:
    procs = [_spawn("fill", str(size), session) for _ in range(4)]
    try:
        for p in procs:  # release all four writers at once
            assert p.stdin is not None
            p.stdin.write(b"go\n")
            p.stdin.flush()
        counts = []
        for p in procs:
            out, err = p.communicate(timeout=WAIT_SECONDS)
            assert p.returncode == 0, err.decode()
            stored, code = out.decode().split()
            assert code == "artifact_quota_exceeded"
            counts.append(int(stored))
        return counts
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=WAIT_SECONDS)


def test_four_processes_filling_one_session_never_exceed_its_byte_quota(xdg: XdgPaths) -> None:
    size = 3 * MIB  # 64 MiB is not a multiple: the last writer must be refused, not squeezed in
    counts = _fill_concurrently(size, "bytes-session")
    store = ArtifactStore(xdg.working_context_dir)
    usage = store.stats().sessions["bytes-session"]
    assert usage.bytes <= SESSION_STORE_MAX_BYTES
    assert usage.objects == sum(counts) == SESSION_STORE_MAX_BYTES // size
    assert list((xdg.working_context_dir / "staging").iterdir()) == []


def test_four_processes_filling_one_session_never_exceed_its_object_quota(xdg: XdgPaths) -> None:
    counts = _fill_concurrently(16, "objects-session")
    store = ArtifactStore(xdg.working_context_dir)
    refs = store.list(session_id="objects-session").refs
    assert len(refs) == sum(counts) == SESSION_STORE_MAX_OBJECTS
    assert len({r.id for r in refs}) == SESSION_STORE_MAX_OBJECTS


def _kill_mid_write(proc: subprocess.Popen[bytes], root: Path) -> None:
    assert proc.stdin is not None
    # The child reads stdin in 1 MiB blocks and writes each block to staging before reading the
    # next. A pipe holds 64 KiB, so once 2 MiB have been accepted the child has written its first
    # block and is blocked reading mid-artifact: that is where it dies.
    proc.stdin.write(b"z" * (2 * MIB))
    proc.stdin.flush()
    staged = list((root / "staging").iterdir())
    assert len(staged) == 1 and (staged[0] / "payload").stat().st_size >= MIB
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=WAIT_SECONDS)
    assert proc.returncode == -signal.SIGKILL


def test_sigkill_in_the_middle_of_a_write_leaves_no_visible_artifact(xdg: XdgPaths) -> None:
    root = xdg.working_context_dir
    store = ArtifactStore(root)
    kept = store.put(b"earlier evidence", session_id="killed")
    with _spawn("stream", "killed") as proc:
        _kill_mid_write(proc, root)
    listing = store.list()
    assert [r.id for r in listing.refs] == [kept.id] and listing.problems == ()
    assert store.read(kept.id, session_id="killed")[1] == b"earlier evidence"
    staged = list((root / "staging").iterdir())
    assert store.stats().staging_entries == len(staged) == 1
    report = store.gc()
    assert report.staging_removed == [staged[0].name] and report.removed == []
    assert list((root / "staging").iterdir()) == []
    assert [r.id for r in store.list().refs] == [kept.id]


def test_gc_leaves_a_live_writers_staging_alone(xdg: XdgPaths) -> None:
    root = xdg.working_context_dir
    store = ArtifactStore(root)
    with _spawn("stream", "live") as proc:
        assert proc.stdin is not None
        proc.stdin.write(b"y" * (2 * MIB))
        proc.stdin.flush()
        report = store.gc()
        assert (report.staging_in_use, report.staging_removed) == (1, [])
        out, _err = proc.communicate(b"end", timeout=WAIT_SECONDS)
    assert (proc.returncode, out) == (0, b"committed\n")
    (ref,) = store.list(session_id="live").refs
    assert ref.size == 2 * MIB + 3
