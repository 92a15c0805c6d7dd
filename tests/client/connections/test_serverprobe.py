"""`ivoai doctor` probes every enrolled server: a real gateway, a refused credential, a dead port, a
listener that never answers, a self-signed TLS server and a plaintext non-loopback URL."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from ivoai.client.config.secrets import SecretsStore
from ivoai.client.connections.registry import ConnectionRegistry
from ivoai.client.connections.serverprobe import probe_servers
from ivoai.client.knowledge.profiles import ServerProfile
from ivoai.common.paths import XdgPaths
from tests.client.memoryhooks.support import Gateway, start_gateway
from tests.conftest import run_ivoai
from tests.tls import self_signed_cert


@pytest.fixture
def gateway(tmp_path: Path, xdg: XdgPaths) -> Iterator[Gateway]:
    gw = start_gateway(tmp_path)
    gw.enroll(xdg, alias="team")
    try:
        yield gw
    finally:
        gw.stop()


def _register(xdg: XdgPaths, alias: str, url: str, n: int) -> None:
    profile = ServerProfile(
        id="srv_" + f"{n:02x}" * 16,
        alias=alias,
        base_url=url,
        purpose=alias,
        endpoints={"memory_mcp": "/v1/memory/mcp", "context_mcp": "/v1/mcp/context", "ready": "/ready"},
        features={"memory": True, "context": True},
        enrolled_at=f"2026-11-0{n}T00:00:00Z",
    )
    with ConnectionRegistry(xdg).update() as state:
        state.servers.append(profile)
    SecretsStore(xdg).put(profile.id, "ivc_" + "s" * 40)


def test_a_healthy_server_is_reported_without_any_secret(gateway: Gateway, xdg: XdgPaths) -> None:
    done = run_ivoai("doctor", "--json")
    doc = json.loads(done.stdout)
    [server] = doc["servers"]
    assert server["alias"] == "team" and server["ok"] is True
    assert (server["reachable"], server["tls"], server["protocol"], server["protocol_ok"]) == (
        True,
        "plaintext_loopback",
        1,
        True,
    )
    assert (server["credential"], server["context"], server["memory"], server["ready"]) == (
        "accepted",
        "ok",
        "ok",
        "ready",
    )
    assert not [p for p in doc["problems"] if "server" in p]
    credential = SecretsStore(xdg).get(gateway.profile_id)
    assert credential and credential not in done.stdout and credential not in done.stderr
    cache = (xdg.cache / "doctor-servers.json").read_text()
    assert credential not in cache
    text = run_ivoai("doctor")
    assert "team" in text.stdout and "accepted" in text.stdout


def test_a_refused_credential_is_a_doctor_problem(gateway: Gateway, xdg: XdgPaths) -> None:
    SecretsStore(xdg).put(gateway.profile_id, "ivc_" + "x" * 40)
    done = run_ivoai("doctor", "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == 1
    assert doc["servers"][0]["credential"] == "refused"
    assert "server team: credential refused" in doc["problems"]
    assert "x" * 40 not in done.stdout


def _silent_listener() -> tuple[socket.socket, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)  # accepts TCP connections (backlog) and never answers
    return sock, int(sock.getsockname()[1])


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[str]:
    cert, key = self_signed_cert(tmp_path)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)

    async def discovery(request: object) -> JSONResponse:
        return JSONResponse({"protocol_version": 1, "server_version": "0", "public_base_url": "x"})

    app = Starlette(routes=[Route("/.well-known/ivoai", discovery)])
    server = uvicorn.Server(
        uvicorn.Config(app, log_config=None, ssl_certfile=str(cert), ssl_keyfile=str(key), lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)  # uvicorn's own start flag; bounded
    try:
        yield f"https://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_broken_servers_are_probed_in_parallel_within_the_deadline(
    gateway: Gateway, xdg: XdgPaths, tls_server: str
) -> None:
    silent, silent_port = _silent_listener()
    try:
        _register(xdg, "dead", f"http://127.0.0.1:{_dead_port()}", 1)
        _register(xdg, "silent", f"http://127.0.0.1:{silent_port}", 2)
        _register(xdg, "selfsigned", tls_server, 3)
        _register(xdg, "plain", "http://memory.example.com", 4)
        results = {h.alias: h for h in probe_servers(xdg, deadline=1.5, use_cache=False)}
    finally:
        silent.close()
    assert results["team"].ok
    assert results["dead"].reachable is False and "cannot connect" in str(results["dead"].error)
    assert "1.5s" in str(results["silent"].error) and not results["silent"].ok
    assert results["selfsigned"].tls == "invalid" and "TLS validation failed" in str(
        results["selfsigned"].error
    )
    assert results["plain"].tls == "plaintext_refused" and results["plain"].reachable is None
    assert all(h.problem() for name, h in results.items() if name != "team")


def test_results_are_cached_for_a_minute_unless_refreshed_or_re_enrolled(
    gateway: Gateway, xdg: XdgPaths
) -> None:
    [first] = probe_servers(xdg)
    assert first.ok and not first.cached
    gateway.stop()
    [cached] = probe_servers(xdg)
    assert cached.ok and cached.cached
    [later] = probe_servers(xdg, now=time.time() + 61)
    assert not later.ok and later.reachable is False
    [refreshed] = probe_servers(xdg, use_cache=False)
    assert not refreshed.cached and refreshed.reachable is False
    gateway.start()
    with ConnectionRegistry(xdg).update() as state:  # a re-enrollment changes the profile
        from dataclasses import replace

        state.servers = [replace(p, enrolled_at="2026-12-31T00:00:00Z") for p in state.servers]
    [after] = probe_servers(xdg)
    assert after.ok and not after.cached
