"""Helpers for launcher tests: install stand-ins into ivoai's managed bin dir, run ivoai, wait for lines."""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ivoai.common.paths import XdgPaths

HERE = Path(__file__).resolve().parent
CLIENT_SCRIPT = HERE / "standin_client.py"
CAVEMAN_SCRIPT = HERE.parent / "compression" / "caveman_standin.py"
WAIT_SECONDS = 60.0  # bound on every event wait (a loaded 2-core machine starts Python slowly)


def managed_bin(xdg: XdgPaths) -> Path:
    path = xdg.data / "bin"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def install_script(xdg: XdgPaths, name: str, source: Path) -> Path:
    """Copy a stand-in script to ivoai's managed bin dir as `name`, runnable with this interpreter."""
    target = managed_bin(xdg) / name
    target.write_text(f"#!{sys.executable}\n" + source.read_text(encoding="utf-8"), encoding="utf-8")
    target.chmod(0o755)
    return target


def install_client(xdg: XdgPaths, name: str) -> Path:
    return install_script(xdg, name, CLIENT_SCRIPT)


def install_caveman(xdg: XdgPaths) -> str:
    """Install the caveman-proxy stand-in; return its SHA-256 (for IVOAI_TEST_CAVEMAN_SHA256)."""
    path = install_script(xdg, "caveman-proxy", CAVEMAN_SCRIPT)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def start_ivoai(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`python -m ivoai ARGS` as a real process with piped stdout/stderr (not a terminal)."""
    return subprocess.Popen(
        [sys.executable, "-m", "ivoai", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env if env is not None else dict(os.environ),
    )


def finish(proc: subprocess.Popen[str], timeout: float = WAIT_SECONDS) -> tuple[int, str, str]:
    """Wait for `proc` (killing it if it outlives `timeout`), close its pipes; (code, stdout, stderr)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, out, err


def wait_line(proc: subprocess.Popen[str], expected: str, timeout: float = WAIT_SECONDS) -> None:
    """Block until `proc` prints `expected` on stdout (bounded)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            line = proc.stdout.readline()
            if not line:
                break
            if line.strip() == expected:
                return
    raise AssertionError(f"no {expected!r} line from ivoai within {timeout}s (exit {proc.poll()})")


def reports(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def wait_for(predicate: Any, timeout: float = WAIT_SECONDS, what: str = "condition") -> None:
    """Poll a cheap predicate until true (bounded); for state another process writes."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def tree_digest(root: Path) -> dict[str, str]:
    """relative path -> kind, mode and SHA-256 of every entry below `root` ({} when absent)."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = f"link:{os.readlink(path)}"
        elif path.is_dir():
            out[rel] = f"dir:{st.st_mode & 0o7777:o}"
        else:
            out[rel] = f"file:{st.st_mode & 0o7777:o}:{hashlib.sha256(path.read_bytes()).hexdigest()}"
    return out
