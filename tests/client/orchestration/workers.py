"""Helpers for worker tests: a git work tree, a spec, the WorkerIO, waiting for a PID."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from ivoai.client.governance import ArtifactMetrics
from ivoai.client.orchestration._scoring import Tier
from ivoai.client.orchestration._worker import WorkerIO
from ivoai.client.orchestration._worker_spec import WorkerSpec
from ivoai.client.workingcontext import ArtifactStore
from ivoai.common.paths import XdgPaths

SESSION = "ses_" + "a" * 32
WAIT_SECONDS = 60.0


def git_tree(path: Path) -> Path:
    """A small git work tree with one committed file."""
    path.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    (path / "parser.py").write_text("def parse(x):\n    return x\n")
    subprocess.run(["git", "-C", str(path), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", "init"], check=True, env=env)
    return path


def spec(
    workdir: Path, *, vendor: str = "codex", worker_id: str = "wrk_1", task_id: str = "scan", **kw: Any
) -> WorkerSpec:
    """A worker spec with a small prompt."""
    model = kw.pop("model", "gpt-6.2-sol" if vendor == "codex" else "sonnet")
    return WorkerSpec(
        session_id=SESSION,
        task_id=task_id,
        worker_id=worker_id,
        vendor=vendor,
        model=model,
        effort=kw.pop("effort", "low"),
        tier=kw.pop("tier", Tier.BALANCED),
        prompt=kw.pop("prompt", "Scan parser.py"),
        workdir=str(workdir),
        **kw,
    )


def worker_io(xdg: XdgPaths, tmp_path: Path, **kw: Any) -> WorkerIO:
    """The IO a worker run needs: the real ArtifactStore, a private spool root, the test env."""
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700, exist_ok=True)
    return WorkerIO(ArtifactStore(), spool, dict(os.environ), ArtifactMetrics(), **kw)


def wait_for(predicate: Any, timeout: float = WAIT_SECONDS) -> None:
    """Poll `predicate` (bounded; for state owned by other processes)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def standin_log(home: Path, name: str) -> list[dict[str, Any]]:
    """Lines a stand-in appended to a log in its config directory."""
    path = home / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
