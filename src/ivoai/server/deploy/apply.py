"""`ivoai server setup --apply`: install a rendered deployment (root only, plan first).

Steps, in order: create the group and users (`systemd-sysusers`), install every file with its mode and
owner (atomic replacement; existing generated keys are kept), create the layout (`systemd-tmpfiles
--create`), then on the live system (`root == /`) `systemctl daemon-reload`, enable and start the
units, and in services mode `docker compose up -d` (Docker Engine must already be installed). With
another `root` (an image or a test tree) the steps that need a running system are listed as skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import atomic_write_in_dir
from ivoai.server.deploy.render import (
    BACKEND_USER,
    ETC,
    GROUP,
    RenderedFile,
    RenderOptions,
    read_existing_secrets,
    render,
)


class ApplyError(IvoaiError):
    """A step of `setup --apply` failed (the message names it)."""

    code = "setup_failed"


@dataclass(frozen=True)
class Step:
    action: str
    detail: str
    argv: tuple[str, ...] = ()
    live_only: bool = False  # needs the running system (skipped for another --root)

    def to_json(self, skipped: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "detail": self.detail}
        if skipped:
            out["skipped"] = "not the live system (--root)"
        return out


def plan(opts: RenderOptions, root: Path) -> tuple[list[Step], list[RenderedFile]]:
    """What `--apply` would do, and the files it would install (keys already under `root` are kept)."""
    files = render(opts, existing_secrets=read_existing_secrets(root))
    r = str(root)
    first = [f for f in files if f.path.startswith("/usr/lib/")]  # sysusers.d and tmpfiles.d: needed first
    rest = [f for f in files if not f.path.startswith("/usr/lib/")]
    steps = [_install_step(f) for f in first]
    steps.append(
        Step(
            "users",
            f"group {GROUP}; non-login system users ivoai-gateway and {BACKEND_USER}",
            ("systemd-sysusers", f"--root={r}", str(root / "usr/lib/sysusers.d/ivoai.conf")),
        )
    )
    steps += [_install_step(f) for f in rest]
    steps.append(
        Step(
            "layout",
            f"{ETC}, /var/lib/ivoai/…, /run/ivoai with their owners and modes",
            ("systemd-tmpfiles", f"--root={r}", "--create", str(root / "usr/lib/tmpfiles.d/ivoai.conf")),
        )
    )
    units = ["ivoai-gateway.service"]
    if opts.mode == "services":
        compose = (
            opts.docker,
            "compose",
            "-f",
            f"{ETC}/compose.yaml",
            "--env-file",
            f"{ETC}/backends/ids.env",
        )
        steps.append(Step("backends", "start Qdrant and TEI", (*compose, "up", "-d"), live_only=True))
        units.append("ivoai-reingest.timer")
    steps.append(Step("systemd", "reload unit files", ("systemctl", "daemon-reload"), live_only=True))
    steps.append(Step("start", " ".join(units), ("systemctl", "enable", "--now", *units), live_only=True))
    return steps, files


def _install_step(f: RenderedFile) -> Step:
    shown = "(generated key, not shown)" if f.secret else f"{len(f.content)} bytes"
    return Step("install", f"{f.path} {f.mode:04o} {f.owner}:{f.group} {shown}")


def _ids(root: Path, name: str, db: str) -> int:
    """The numeric id of `name` in `root`/etc/passwd or group."""
    path = root / "etc" / db
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split(":")
        if parts and parts[0] == name:
            return int(parts[2])
    raise ApplyError(f"{name} is not in {path} (did systemd-sysusers run?)")


def apply(opts: RenderOptions, root: Path, *, announce: Any = None) -> list[dict[str, Any]]:
    """Run `plan` for real.

    Raises:
        ApplyError: not root, or a step failed (earlier steps stay done; re-running is safe).
    """
    if os.geteuid() != 0:
        raise ApplyError(
            "--apply must run as root (it creates users and installs units); "
            "review the files first with --render DIR"
        )
    live = os.path.realpath(root) == "/"
    steps, files = plan(opts, root)
    by_path = {f.path: f for f in files}
    (root / "etc").mkdir(parents=True, exist_ok=True)  # systemd-sysusers locks etc/passwd there
    done: list[dict[str, Any]] = []
    for step in steps:
        if step.live_only and not live:
            done.append(step.to_json(skipped=True))
            continue
        if announce is not None:
            announce(f"{step.action}: {step.detail}")
        if step.action == "install":
            _install(root, by_path[step.detail.split(" ", 1)[0]])
        elif step.action == "backends":
            _write_ids(root)
            _run(step)
        else:
            _run(step)
        done.append(step.to_json())
    if opts.mode == "services" and not live:
        _write_ids(root)
    return done


def _install(root: Path, f: RenderedFile) -> None:
    dest = root / f.path.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if "/secrets" in f.path or "/backends" in f.path:
        os.chmod(dest.parent, 0o700)
    atomic_write_in_dir(dest, f.content, mode=f.mode)
    uid = 0 if f.owner == "root" else _ids(root, f.owner, "passwd")
    gid = 0 if f.group == "root" else _ids(root, f.group, "group")
    os.chown(dest, uid, gid, follow_symlinks=False)
    if "/secrets" in f.path:
        os.chown(dest.parent, uid, gid, follow_symlinks=False)


def _write_ids(root: Path) -> None:
    """The backend user's numeric ids for Compose (`user: ${IVOAI_BACKEND_UID}:${IVOAI_BACKEND_GID}`)."""
    uid, gid = _ids(root, BACKEND_USER, "passwd"), _ids(root, GROUP, "group")
    dest = root / ETC.lstrip("/") / "backends" / "ids.env"
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_in_dir(dest, f"IVOAI_BACKEND_UID={uid}\nIVOAI_BACKEND_GID={gid}\n".encode(), mode=0o600)


def _run(step: Step) -> None:
    if shutil.which(step.argv[0]) is None and not os.path.isabs(step.argv[0]):
        raise ApplyError(f"{step.action}: {step.argv[0]} is not installed")
    proc = subprocess.run(list(step.argv), capture_output=True, text=True, check=False, timeout=300)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ApplyError(f"{step.action} failed ({' '.join(step.argv[:2])}…): {' | '.join(tail)}")
