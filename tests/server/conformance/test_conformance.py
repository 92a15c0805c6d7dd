"""The official MCP conformance suite (@modelcontextprotocol/conformance) against a running gateway.

Scenarios that apply to a server without fixture tools run against `/mcp` on a real uvicorn socket,
with an OAuth access token issued through the real store and injected by a Node preload
(`inject-auth.mjs`; the suite itself sends no Authorization header). `dns-rebinding-protection`
makes its own unauthenticated requests and expects 2xx for a valid localhost Host/Origin, so it
runs against an instance built for the test: the gateway's own `GatewayGuard` in front of a bare
MCP SDK server without authentication; what it checks (Host/Origin validation) is the guard.

Not applicable (they call fixture tools, prompts or resources an ivoai server does not have, or
server-initiated sampling/elicitation/logging it does not use): logging-set-level,
completion-complete, tools-call-simple-text, tools-call-image, tools-call-audio,
tools-call-embedded-resource, tools-call-mixed-content, tools-call-with-logging,
tools-call-with-progress, tools-call-sampling, tools-call-elicitation, json-schema-2020-12,
elicitation-sep1034-defaults, elicitation-sep1330-enums, server-sse-polling (needs a
test_reconnection fixture tool), resources-read-text, resources-read-binary,
resources-templates-read, resources-subscribe, resources-unsubscribe, prompts-get-simple,
prompts-get-with-args, prompts-get-embedded-resource, prompts-get-with-image.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from ivoai.server.app import GatewayApp
from ivoai.server.gateway.guard import GatewayGuard
from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.runtime.runner import RunningServer, bind, start_background
from ivoai.server.runtime.serving import ServerThread
from tests.conftest import REPO_ROOT, tool_path
from tests.server.gateway.support import data_dir, make_hub

SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "tools-call-error",
    "server-sse-multiple-streams",
]
SUITE = REPO_ROOT / "tools" / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
PRELOAD = Path(__file__).with_name("inject-auth.mjs")
SUITE_TIMEOUT_SECONDS = 120
STARTUP_SECONDS = 30.0


def _node() -> Path:
    node = tool_path("node")
    if not node.exists() or not SUITE.exists():
        pytest.fail(f"the conformance suite is not installed ({node}, {SUITE}); run scripts/test")
    return node


def issue_token(app: GatewayApp) -> str:
    """An access token for /mcp through the real OAuth store (registration, consent, redemption)."""
    store = app.oauth
    store.register_client(
        "conformance", {"redirect_uris": ["http://127.0.0.1/cb"], "scope": "context:read memory:read"}, None
    )
    activation = store.create_activation(scopes=["context:read", "memory:read"])
    code, _ = store.approve(
        activation_code=activation.code,
        client_id="conformance",
        requested_scopes=None,
        code_challenge="-",
        redirect_uri="http://127.0.0.1/cb",
        redirect_uri_provided_explicitly=True,
        resource=app.settings.mcp_resource_url,
    )
    return store.redeem_code(code, "conformance").access_token


def run_suite(url: str, scenario: str, token: str | None, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IVOAI_CONFORMANCE_TOKEN": token or ""}
    cmd = [str(_node())]
    if token:
        cmd += ["--import", PRELOAD.as_uri()]
    cmd += [str(SUITE), "server", "--url", url, "--scenario", scenario, "-o", str(tmp_path / scenario)]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=SUITE_TIMEOUT_SECONDS, env=env, cwd=tmp_path, check=False
    )


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, str]]:
    data = data_dir(tmp_path_factory.mktemp("conformance"))
    srv = start_background(data, GatewaySettings(listen_port=0), hub=make_hub(data))
    try:
        yield srv, issue_token(srv.app)
    finally:
        srv.stop()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_scenario_passes_against_web_mcp(
    gateway: tuple[RunningServer, str], scenario: str, tmp_path: Path
) -> None:
    srv, token = gateway
    result = run_suite(f"{srv.url}/mcp", scenario, token, tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


NATIVE_SCENARIOS = ["server-initialize", "ping", "tools-list", "tools-call-error"]


@pytest.mark.parametrize("scenario", NATIVE_SCENARIOS)
def test_conformance_scenario_passes_against_the_native_context_route(
    gateway: tuple[RunningServer, str], scenario: str, tmp_path: Path
) -> None:
    """The native routes are stateless JSON Streamable HTTP; the stream scenarios do not apply there."""
    srv, _ = gateway
    code = srv.app.enrollment.create_code(scopes=["context:read"]).code
    credential = srv.app.enrollment.exchange(code).credential
    result = run_suite(f"{srv.url}/v1/mcp/context", scenario, credential, tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_without_a_token_the_suite_is_refused(gateway: tuple[RunningServer, str], tmp_path: Path) -> None:
    srv, _ = gateway
    result = run_suite(f"{srv.url}/mcp", "server-initialize", None, tmp_path)
    assert result.returncode != 0


@contextlib.contextmanager
def serve(asgi: ASGIApp, sock: socket.socket) -> Iterator[None]:
    """Serve `asgi` on `sock` with uvicorn in a thread for the block."""
    config = uvicorn.Config(asgi, log_level="warning", lifespan="on")
    serving = ServerThread.start(config, sock, name="conformance-guard", timeout=STARTUP_SECONDS)
    try:
        yield
    finally:
        serving.stop(15.0)


def test_dns_rebinding_protection_scenario_passes_against_the_gateway_guard(tmp_path: Path) -> None:
    bare: MCPServer[Any] = MCPServer("guard-under-test")
    # The SDK's own Host/Origin check is off, so only ivoai's guard stands between the suite and the server.
    inner = bare.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    sock = bind("127.0.0.1", 0)
    settings = GatewaySettings(listen_port=sock.getsockname()[1])
    with serve(GatewayGuard(inner, settings), sock):
        result = run_suite(f"{settings.base_url}/mcp", "dns-rebinding-protection", None, tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_without_the_guard_the_dns_rebinding_scenario_fails(tmp_path: Path) -> None:
    bare: MCPServer[Any] = MCPServer("unguarded")
    inner = bare.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    sock = bind("127.0.0.1", 0)
    with serve(inner, sock):
        result = run_suite(
            f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", "dns-rebinding-protection", None, tmp_path
        )
    assert result.returncode != 0
