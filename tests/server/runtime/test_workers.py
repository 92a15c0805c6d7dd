"""`ivoai server start --workers 2`: two gateway processes on one socket, shared state under load.

Services mode against `backends_standin.py` (a Qdrant REST stand-in over qdrant-client's local mode and
a TEI stand-in, in their own process; see its docstring for why). What is verified: the services-mode
code path (TEI embedder and `QdrantIndex` over HTTP) from two worker processes at once, and that the
state the workers share stays consistent under concurrent load through the public HTTP surface:
one-time enrollment codes (file lock), memory pages with optimistic concurrency (SQLite WAL), OAuth
dynamic registrations (locked store). Not verified here: a real Qdrant server or TEI container.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import anyio
import httpx2
import pytest

from ivoai.server.app import GatewayApp
from ivoai.server.auth.enrollment import EnrollmentStore
from ivoai.server.auth.oauth_store import OAuthStore
from ivoai.server.config import load_config, update_config
from ivoai.server.context.service import ContextService
from ivoai.server.datadir import ServerDataDir
from ivoai.server.runtime.lifecycle import init_server
from ivoai.server.runtime.runstate import read_run_state
from tests.conftest import REPO_ROOT, CliRunner
from tests.server.auth.oauth_client import INIT, MCP_HEADERS, full_flow
from tests.server.backup.support import DOCS
from tests.server.gateway.support import mcp_session

KEY = "standin-key-0123456789abcdef"
MCP = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def backends(tmp_path: Path) -> Iterator[str]:
    port_file = tmp_path / "standin.port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.server.gateway.backends_standin", str(port_file), KEY],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
    )
    try:
        ready = threading.Event()
        for _ in range(600):  # the port file appears once the socket listens (bounded: 60 s)
            if port_file.exists() and port_file.read_text():
                break
            if proc.poll() is not None or ready.wait(0.1):
                break
        assert port_file.exists(), "the backends stand-in did not start"
        yield f"http://127.0.0.1:{port_file.read_text()}"
    finally:
        proc.terminate()
        proc.wait(30)


def _services_data_dir(root: Path, url: str) -> ServerDataDir:
    data = ServerDataDir(root)
    init_server(root, mode="services")
    for name in ("tei.key", "qdrant.key"):
        fd = os.open(data.secrets / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, KEY.encode())
        os.close(fd)
    update_config(
        data,
        {
            "tei_url": url,
            "tei_api_key_file": "tei.key",
            "qdrant_url": url,
            "qdrant_api_key_file": "qdrant.key",
        },
        table_name="context",
    )
    return data


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _call(
    http: httpx2.Client, route: str, token: str, name: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    r = http.post(route, json=body, headers={**MCP, "Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()["result"]
    return result


async def _web_mcp_session(base: str, data: ServerDataDir) -> tuple[str | None, list[bool]]:
    """OAuth through the workers, then `/mcp` with the MCP SDK client on a new connection per request
    (the kernel spreads them over both workers): the initialize answer's session ID, and whether
    each of six tool calls failed."""
    issuer = SimpleNamespace(
        oauth=OAuthStore(data.root, data.oauth), settings=SimpleNamespace(mcp_resource_url=base + "/mcp")
    )
    no_reuse = httpx2.Limits(max_keepalive_connections=0)
    async with httpx2.AsyncClient(base_url=base, timeout=60, limits=no_reuse) as http:
        _, tokens = await full_flow(cast(GatewayApp, issuer), http)
        http.headers["Authorization"] = f"Bearer {tokens['access_token']}"
        init = await http.post("/mcp", json=INIT, headers=MCP_HEADERS)
        assert init.status_code == 200, init.text
        async with mcp_session(base + "/mcp", http) as session:
            errors = [(await session.call_tool("memory_status", {})).is_error for _ in range(6)]
    return init.headers.get("mcp-session-id"), errors


def test_two_workers_share_enrollment_memory_oauth_and_the_qdrant_index_under_load(
    backends: str, tmp_path: Path
) -> None:
    data = _services_data_dir(tmp_path / "srv", backends)
    corpus = tmp_path / "corpus"
    for rel, text in DOCS.items():
        (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
        (corpus / rel).write_text(text)
    # TEI + Qdrant over HTTP, as the workers will use them. qdrant-client warns about an API key over
    # plain HTTP even on loopback (the seed's own services layout); the warning is not under test.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Api key is used with an insecure connection", UserWarning)
        with ContextService.open(data, load_config(data).context) as ctx:
            ctx.add_connector("docs", "filesystem", str(corpus))
            assert ctx.ingest().status == "ok"

    gateway = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ivoai",
            "server",
            "--data-dir",
            str(data.root),
            "start",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "2",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert gateway.stderr is not None
        assert "listening on" in gateway.stderr.readline()
        line = gateway.stderr.readline()
        assert line.startswith("2 workers: pids"), line
        workers = [int(p) for p in line.split("pids", 1)[1].split()]
        state = read_run_state(data)
        assert state is not None and state.pid == gateway.pid and state.workers == 2
        base = state.base_url
        before = {pid: _cpu_ticks(pid) for pid in workers}

        # enrollment: 24 codes, each presented twice at once -> exactly one credential per code
        store = EnrollmentStore(data.root, data.enrollment)
        codes = [store.create_code().code for _ in range(24)]
        with httpx2.Client(base_url=base, timeout=60) as http0:
            assert http0.get("/health").status_code == 200

        def exchange(code: str) -> tuple[int, str | None]:
            with httpx2.Client(base_url=base, timeout=60) as http:
                r = http.post("/v1/enroll", json={"code": code})
                return r.status_code, r.json().get("credential")

        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(exchange, codes + codes))
        credentials = [c for status, c in results if status == 200 and c is not None]
        assert len(credentials) == 24 and len(set(credentials)) == 24
        assert sorted(s for s, _ in results).count(400) == 24

        # memory: 8 clients write 6 pages each and race on one page with the same expected version
        def client(n: int) -> list[str]:
            token = credentials[n]
            outcomes = []
            with httpx2.Client(base_url=base, timeout=60) as http:
                for i in range(6):
                    res = _call(
                        http,
                        "/v1/memory/mcp",
                        token,
                        "memory_write_page",
                        {"workspace": "team", "project": "p", "path": f"c{n}/p{i}.md", "body": f"{n}-{i}"},
                    )
                    assert not res.get("isError"), res
                res = _call(
                    http,
                    "/v1/memory/mcp",
                    token,
                    "memory_write_page",
                    {
                        "workspace": "team",
                        "project": "p",
                        "path": "race.md",
                        "body": f"by {n}",
                        "expected_version": 1,
                    },
                )
                outcomes.append("conflict" if res.get("isError") else "won")
                hits = _call(
                    http, "/v1/mcp/context", token, "context_search", {"query": "sqlite write-ahead logging"}
                )
                assert hits["structuredContent"]["results"], hits
            return outcomes

        with httpx2.Client(base_url=base, timeout=60) as http:
            _call(
                http,
                "/v1/memory/mcp",
                credentials[0],
                "memory_write_page",
                {"workspace": "team", "project": "p", "path": "race.md", "body": "base"},
            )
        with ThreadPoolExecutor(8) as pool:
            outcomes = [o for out in pool.map(client, range(8)) for o in out]
        assert sorted(outcomes) == ["conflict"] * 7 + ["won"]

        # OAuth: 16 concurrent dynamic registrations, each then known to whichever worker answers
        def register(_: int) -> int:
            with httpx2.Client(base_url=base, timeout=60) as http:
                r = http.post(
                    "/register", json={"redirect_uris": ["https://client.example/cb"], "client_name": "t"}
                )
                assert r.status_code == 201, r.text
                cid = r.json()["client_id"]
            statuses = []
            for _round in range(2):  # a fresh connection each time: likely the other worker too
                with httpx2.Client(base_url=base, timeout=60) as http:
                    a = http.get(
                        "/authorize",
                        params={
                            "response_type": "code",
                            "client_id": cid,
                            "redirect_uri": "https://client.example/cb",
                            "code_challenge": "x" * 43,
                            "code_challenge_method": "S256",
                            "state": "s",
                            "resource": base + "/mcp",
                        },
                    )
                    statuses.append(a.status_code)
            return max(statuses) if min(statuses) == max(statuses) else -1

        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(register, range(16))) == {302}

        after = {pid: _cpu_ticks(pid) for pid in workers}
        assert all(after[pid] > before[pid] for pid in workers), (before, after)  # both workers served
        with httpx2.Client(base_url=base, timeout=60) as http:
            pages = _call(http, "/v1/memory/mcp", credentials[1], "memory_status", {})["structuredContent"][
                "pages"
            ]
        assert pages == 8 * 6 + 1

        # Web MCP: stateless with two workers (no session ID), so a session works on either worker
        session_id, errors = anyio.run(_web_mcp_session, base, data)
        assert session_id is None and errors == [False] * 6
    finally:
        gateway.send_signal(signal.SIGTERM)
        try:
            assert gateway.wait(timeout=60) == 0
        finally:
            if gateway.poll() is None:
                gateway.kill()
                gateway.wait()
            if gateway.stderr is not None:
                gateway.stderr.close()
    assert read_run_state(data) is None
    for pid in workers:  # the workers are gone (reaped by the parent, or at most a zombie)
        assert (
            not os.path.exists(f"/proc/{pid}")
            or Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        )


def test_embedded_mode_refuses_more_than_one_worker_naming_services_mode(
    cli: CliRunner, tmp_path: Path
) -> None:
    root = tmp_path / "srv"
    assert cli("server", "--data-dir", str(root), "init").code == 0
    r = cli("server", "--data-dir", str(root), "start", "--listen", "127.0.0.1:0", "--workers", "2")
    assert r.code == 1
    assert "services mode" in r.err and "Qdrant Edge" in r.err
    assert read_run_state(ServerDataDir(root)) is None
