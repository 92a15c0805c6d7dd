"""SIGKILL in the middle of a backup or a restore: no partial archive visible, no torn file."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from ivoai.server.backup.archive import create_backup, list_backups
from ivoai.server.backup.restore import restore_archive
from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory.service import MemoryService
from ivoai.server.runtime.lifecycle import init_server
from tests.conftest import REPO_ROOT
from tests.server.gateway.support import HashEmbedder

# The child stops inside the progress callback of the given phase (mid-work) and waits to be killed.
CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ivoai.server.datadir import ServerDataDir
    from ivoai.server.backup.archive import create_backup
    from ivoai.server.backup.restore import restore_archive

    mode, root, phase, count = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    seen = 0

    def progress(p):
        global seen
        if p.phase == phase:
            seen += 1
            if seen == count:
                print("ready", flush=True)
                sys.stdin.read()  # never answered: the parent kills us here

    if mode == "backup":
        create_backup(ServerDataDir(root), progress=progress)
    else:
        restore_archive(ServerDataDir(root), Path(sys.argv[5]), progress=progress, rebuild_index=False)
    print("finished", flush=True)
    """
)


def _run_until_killed(*args: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the child reached the phase (or exited)
        assert line.strip() == "ready", line
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def _source(root: Path, pages: int, body: str) -> ServerDataDir:
    data = ServerDataDir(root)
    init_server(data.root)
    with MemoryService.open(data) as svc:
        for i in range(pages):
            svc.memory_write_page("w", "p", f"p{i}.md", f"{body} {i}\n" + "x" * 2000)
    return data


def test_sigkill_during_backup_leaves_no_visible_archive_and_the_next_backup_cleans_up(
    tmp_path: Path,
) -> None:
    data = _source(tmp_path / "d", 200, "page")
    _run_until_killed("backup", str(data.root), "archive", "2")

    backups = data.root / "backups"
    assert list_backups(backups) == []
    leftovers = sorted(os.listdir(backups))
    assert leftovers and all(n.startswith(".") for n in leftovers)  # hidden temporary files only

    result = create_backup(data)
    assert [b["archive"] for b in list_backups(backups)] == [result.archive]
    assert os.listdir(backups) == [Path(result.archive).name]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sigkill_during_restore_leaves_every_file_old_or_new_and_a_rerun_completes(tmp_path: Path) -> None:
    source = _source(tmp_path / "s", 50, "restored")
    (source.config_file).write_text(source.config_file.read_text() + "\n# from the backup\n")
    archive = Path(create_backup(source).archive)

    target = _source(tmp_path / "t", 20, "original")
    old = {"config": _sha(target.config_file)}
    with MemoryService.open(target) as svc:
        old_pages = svc.memory_status().pages

    # killed after the first file (config.toml) was renamed into place, before the memory database
    _run_until_killed("restore", str(target.root), "write", "1", str(archive))

    assert _sha(target.config_file) != old["config"]
    assert target.config_file.read_text().endswith("# from the backup\n")
    db = target.memory / "memory.sqlite3"
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    with MemoryService.open(target) as svc:
        assert svc.memory_status().pages == old_pages  # still the old database, intact
    assert [n for n in os.listdir(target.run) if n.startswith("restore-staging-")]

    restore_archive(target, archive, embedder=HashEmbedder())
    with MemoryService.open(target) as svc:
        assert svc.memory_status().pages == 50
        assert svc.memory_read_page("w", "p", "p7.md").body.startswith("restored 7")
    assert not [n for n in os.listdir(target.run) if n.startswith("restore-staging-")]
