"""A real ivoai gateway (the server app over a real loopback socket) enrolled by the real client code.

The gateway runs in a thread of the test process (`ivoai.server.runtime.runner.start_background`)
with the test hub's hash embedder; the client side (registry and secrets) is the test's XDG home,
filled by the real enrollment (`add_server`: discovery, code exchange over HTTP). `stop()` and
`start()` take the server down and bring it back on the same port with the same data.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ivoai.client.connections.enroll import add_server
from ivoai.common.paths import XdgPaths
from ivoai.server.datadir import ServerDataDir
from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.memory.service import MemoryService
from ivoai.server.runtime.runner import RunningServer, start_background
from tests.server.gateway.support import make_hub

REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Gateway:
    data: ServerDataDir
    port: int
    running: RunningServer | None = None
    alias: str = "mem"
    profile_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Gateway:
        self.running = start_background(
            self.data, GatewaySettings(listen_port=self.port), hub=make_hub(self.data)
        )
        return self

    def stop(self) -> None:
        if self.running is not None:
            self.running.stop()
            self.running.app.hub.close()
            self.running = None

    def enroll(self, paths: XdgPaths, alias: str = "mem") -> str:
        assert self.running is not None
        code = self.running.app.enrollment.create_code().code
        result = add_server(paths, alias, self.url, code, probe_fn=lambda p, c: [])
        self.alias, self.profile_id = alias, result.profile.id
        return result.profile.id

    def memory(self) -> MemoryService:
        """A second handle on the server's memory database (reads only)."""
        return MemoryService.open(self.data, embedder=None)

    def hook_event_count(self) -> int:
        svc = self.memory()
        try:
            return int(svc.memory_status().hook_events)
        finally:
            svc.close()


def start_gateway(tmp_path: Path) -> Gateway:
    return Gateway(ServerDataDir(tmp_path / "srv").ensure(), free_port()).start()


def run_hook(
    event: str,
    payload: bytes | str,
    *,
    client: str = "claude",
    env: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[bytes]:
    """One real hook process (`python -m ivoai memory hook EVENT --client CLIENT`), payload on stdin."""
    data = payload.encode() if isinstance(payload, str) else payload
    return subprocess.run(
        [sys.executable, "-m", "ivoai", "memory", "hook", event, "--client", client],
        input=data,
        capture_output=True,
        timeout=timeout,
        env=env if env is not None else dict(os.environ),
        check=False,
    )


def stored_events(gateway: Gateway) -> list[dict[str, Any]]:
    """Every hook event the server stored, with its session's project (read from the server's database)."""
    import json
    import sqlite3

    path = gateway.data.root / "memory" / "memory.sqlite3"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute(
            "SELECT e.data, s.project FROM hook_events e JOIN hook_sessions s ON s.id = e.session_row"
        ).fetchall()
    finally:
        conn.close()
    out = []
    for data, project in rows:
        event = json.loads(data)
        event["_project"] = project
        out.append(event)
    return out


def wait_until(predicate: Any, timeout: float = 60.0, what: str = "condition") -> None:
    """Poll another process's effect (a file, the server's database) until `predicate()` holds, bounded."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)  # cross-process state has no notification to wait on; bounded by `timeout`
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
