"""Find, stop and start the gateway that serves a data directory (`restore --stop-gateway`).

A gateway installed as systemd units (`ivoai server setup --apply`) is stopped and started with
`systemctl`; a foreground `ivoai server start` gets SIGTERM (its graceful shutdown) and is started
again as a detached process with the listen address, public URL and worker count it recorded in
`DATA/run/gateway.json`, logging to `DATA/run/gateway.log`. Other command-line-only flags
(`--tls-cert`, `--trusted-proxy`, `--reingest-interval`) are not repeated: settings meant to survive a
restart belong in `config.toml`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from ivoai.common.errors import IvoaiError
from ivoai.common.limits import GATEWAY_START_TIMEOUT_SECONDS, GATEWAY_STOP_TIMEOUT_SECONDS
from ivoai.common.procid import pid_exists, start_marker
from ivoai.server.datadir import ServerDataDir
from ivoai.server.runtime.runstate import RunState, read_run_state

SYSTEMD_UNITS = ("ivoai-gateway.service", "ivoai-context.service")


class GatewayControlError(IvoaiError):
    """The gateway could not be stopped or started again."""

    code = "gateway_control_failed"


@dataclass(frozen=True)
class Stopped:
    """How to bring back what was stopped."""

    state: RunState
    systemd: bool


def _systemd_unit(pid: int) -> bool:
    """True when `pid` runs inside ivoai's gateway unit (its cgroup path names it)."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
            return "ivoai-gateway.service" in f.read()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    # a zombie child of ours is dead for this purpose: it has no start marker
    return pid_exists(pid) and start_marker(pid) is not None


class GatewayControl:
    """The real control: run file, signals, systemctl, a detached `ivoai server start`."""

    def __init__(self, data: ServerDataDir) -> None:
        self.data = data

    def find(self) -> RunState | None:
        return read_run_state(self.data)

    def stop(self, state: RunState) -> Stopped:
        """Stop the gateway and wait until its process is gone (and the run file with it)."""
        systemd = _systemd_unit(state.pid) and shutil.which("systemctl") is not None
        if systemd:
            subprocess.run(
                ["systemctl", "stop", *SYSTEMD_UNITS], check=False, timeout=GATEWAY_STOP_TIMEOUT_SECONDS
            )
        else:
            try:
                os.kill(state.pid, signal.SIGTERM)
            except ProcessLookupError:
                return Stopped(state, systemd)
        deadline = time.monotonic() + GATEWAY_STOP_TIMEOUT_SECONDS
        pause = threading.Event()
        while _alive(state.pid):
            if time.monotonic() > deadline:
                raise GatewayControlError(
                    f"the gateway (pid {state.pid}) did not stop within {GATEWAY_STOP_TIMEOUT_SECONDS:g}s; "
                    "nothing was restored"
                )
            pause.wait(0.05)
        return Stopped(state, systemd)

    def start(self, stopped: Stopped) -> int | None:
        """Start the gateway again; return its pid once it has bound its socket (None under systemd)."""
        if stopped.systemd:
            subprocess.run(
                ["systemctl", "start", *SYSTEMD_UNITS], check=False, timeout=GATEWAY_START_TIMEOUT_SECONDS
            )
            return None
        st = stopped.state
        argv = [sys.executable, "-m", "ivoai", "server", "--data-dir", str(self.data.root), "start"]
        argv += ["--listen", st.listen, "--public-url", st.base_url]
        if st.workers > 1:
            argv += ["--workers", str(st.workers)]
        log = self.data.run / "gateway.log"
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            # posix_spawn, not Popen: the gateway outlives this command and nobody waits for it here.
            pid = os.posix_spawn(
                argv[0],
                argv,
                dict(os.environ),
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, null, 0),
                    (os.POSIX_SPAWN_DUP2, fd, 1),
                    (os.POSIX_SPAWN_DUP2, fd, 2),
                ],
                setsid=True,
            )
        finally:
            os.close(fd)
            os.close(null)
        deadline = time.monotonic() + GATEWAY_START_TIMEOUT_SECONDS
        pause = threading.Event()
        while time.monotonic() < deadline:
            if not _alive(pid):
                raise GatewayControlError(f"the gateway exited on restart; see {log}")
            state = read_run_state(self.data)
            if state is not None and state.pid == pid:  # recorded after its socket is bound
                return pid
            pause.wait(0.1)
        raise GatewayControlError(f"the restarted gateway did not start within the timeout; see {log}")
