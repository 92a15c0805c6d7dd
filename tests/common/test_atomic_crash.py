"""A writer killed with SIGKILL mid-write leaves the old or the new file, never a partial one.

These tests use real processes: the child runs the real `atomic_write` and the parent kills it.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ivoai.common.fsio import atomic_write, read_private_file, remove_stale_staging

OLD = b"old-" * 1024
NEW_SIZE = 8 * 1024 * 1024
WAIT_SECONDS = 30.0

CHILD = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from ivoai.common import fsio

    root = Path(sys.argv[1]); target = root / "state.bin"; mode = sys.argv[2]
    new = b"N" * int(sys.argv[3])

    def announce(word):
        sys.stdout.write(word + "\\n"); sys.stdout.flush()

    if mode == "mid-write":
        real_write = os.write
        def half_write(fd, data):
            written = real_write(fd, bytes(data[: len(data) // 2]))
            announce("paused")
            sys.stdin.readline()  # block until killed
            return written
        os.write = half_write
        fsio.atomic_write(root, target, new)
    elif mode == "before-rename":
        real_fsync = os.fsync
        def fsync_then_pause(fd):
            real_fsync(fd)
            announce("paused")
            sys.stdin.readline()
        os.fsync = fsync_then_pause
        fsio.atomic_write(root, target, new)
    else:  # loop: alternate two contents as fast as possible, announcing each completed write
        other = b"M" * int(sys.argv[3])
        i = 0
        while True:
            fsio.atomic_write(root, target, new if i % 2 else other)
            i += 1
            announce("wrote")
    """
)


def _spawn(root: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), mode, str(NEW_SIZE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _await_line(proc: subprocess.Popen[str], expected: str) -> None:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], WAIT_SECONDS)
    assert ready, f"child did not report {expected!r} within {WAIT_SECONDS}s"
    assert proc.stdout.readline().strip() == expected


def _kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=WAIT_SECONDS) == -signal.SIGKILL
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()


@pytest.mark.parametrize("mode", ["mid-write", "before-rename"])
def test_sigkill_before_the_rename_leaves_the_old_file(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "ivoai"
    atomic_write(root, root / "state.bin", OLD)
    proc = _spawn(root, mode)
    _await_line(proc, "paused")
    _kill(proc)
    assert read_private_file(root, root / "state.bin", NEW_SIZE * 2) == OLD
    staging = [n for n in os.listdir(root) if n.startswith(".state.bin.tmp-")]
    assert len(staging) == 1, "the child was killed with its staging file in place"
    size = os.path.getsize(root / staging[0])
    assert size == (NEW_SIZE // 2 if mode == "mid-write" else NEW_SIZE)
    assert remove_stale_staging(root, root / "state.bin") == 1


def test_sigkill_at_an_arbitrary_moment_leaves_one_complete_version(tmp_path: Path) -> None:
    root = tmp_path / "ivoai"
    versions = {b"N" * NEW_SIZE, b"M" * NEW_SIZE}
    for _ in range(3):
        proc = _spawn(root, "loop")
        _await_line(proc, "wrote")
        _await_line(proc, "wrote")
        _kill(proc)
        assert read_private_file(root, root / "state.bin", NEW_SIZE * 2) in versions
