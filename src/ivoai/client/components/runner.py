"""Installer and probe subprocesses: structured argv, a minimal environment, a timeout, a bounded log.

The environment is built from an allowlist (seed 002, "Security invariants"): no user or provider
credentials reach `npm`, `pip` or a probe. HOME points at a private empty directory, so `~/.npmrc`,
`~/.config/pip`, `~/.netrc` and the vendor logins in `~/.codex` / `~/.claude` are neither read nor
written; npm's and pip's user and global configuration files are switched off. What is kept is what
a download needs on a locked-down network: PATH, locale, proxies and CA bundles.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from ivoai.client.components.errors import InstallerError
from ivoai.common.fsio import PRIVATE_FILE_MODE
from ivoai.common.limits import COMPONENT_INSTALL_LOG_MAX_BYTES
from ivoai.common.net import PROXY_ENV_VARS
from ivoai.common.redact import redact

INSTALLER_ENV_ALLOWLIST = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    *PROXY_ENV_VARS,
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "PIP_CERT",
    "REQUESTS_CA_BUNDLE",
)
LOG_TAIL_BYTES = 2048


def installer_env(parent: Mapping[str, str], home: Path) -> dict[str, str]:
    """The allowlisted environment for npm/pip/probes, with HOME and TMPDIR in `home` (private, empty)."""
    env = {key: parent[key] for key in INSTALLER_ENV_ALLOWLIST if key in parent}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    tmp = home / "tmp"
    tmp.mkdir(mode=0o700, exist_ok=True)
    user_rc, global_rc = home / "user.npmrc", home / "global.npmrc"
    for rc in (user_rc, global_rc):  # npm refuses one file for both levels
        rc.touch(mode=PRIVATE_FILE_MODE, exist_ok=True)
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp),
        NO_COLOR="1",
        npm_config_userconfig=str(user_rc),
        npm_config_globalconfig=str(global_rc),
        npm_config_update_notifier="false",
        npm_config_fund="false",
        npm_config_audit="false",
        PIP_CONFIG_FILE=os.devnull,  # pip: no user, site or global configuration file
        PIP_NO_INPUT="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONNOUSERSITE="1",
    )
    if "NODE_EXTRA_CA_CERTS" not in env and "SSL_CERT_FILE" in env:
        env["NODE_EXTRA_CA_CERTS"] = env["SSL_CERT_FILE"]
    return env


def log_tail(log: Path, limit: int = LOG_TAIL_BYTES) -> str:
    """The redacted last `limit` bytes of an installer log, on one line per original line."""
    try:
        with open(log, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return redact(" | ".join(lines[-6:]))


def run_installer(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float, log: Path, what: str
) -> None:
    """Run one installer step, output appended to `log` (capped); never a shell.

    Raises:
        InstallerError: non-zero exit, timeout (its process group is killed) or failure to start;
            the message names the step and carries the tail of the log.
    """
    fd = os.open(
        log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE
    )
    try:
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                start_new_session=True,  # a timeout kills npm's or pip's whole process group
            )
        except OSError as exc:
            raise InstallerError(f"{what}: could not start {argv[0]} ({exc.strerror or exc})") from None
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise InstallerError(f"{what}: timed out after {timeout:g} s") from None
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    finally:
        os.close(fd)
    _cap(log)
    if code != 0:
        raise InstallerError(f"{what}: exited with status {code}: {log_tail(log)}")


def _cap(log: Path) -> None:
    """Keep only the last COMPONENT_INSTALL_LOG_MAX_BYTES of a log."""
    try:
        size = log.stat().st_size
        if size <= COMPONENT_INSTALL_LOG_MAX_BYTES:
            return
        with open(log, "rb") as fh:
            fh.seek(size - COMPONENT_INSTALL_LOG_MAX_BYTES)
            tail = fh.read()
        with open(log, "wb") as fh:
            fh.write(tail)
    except OSError:
        pass
