"""The official MCP conformance suite (@modelcontextprotocol/conformance) against a running router.

The router needs no reachable upstream for these scenarios (its own `knowledge_status` tool is always
listed). The suite sends no Authorization header, so the router's capability token is injected by the
gateway tests' Node preload (`tests/server/conformance/inject-auth.mjs`).

Not applicable: `tools-call-error` and the other `tools-call-*` scenarios call fixture tools
(`test_error_handling`, …) the router does not have (an unknown tool is a JSON-RPC -32602 error, as
the MCP specification recommends); `resources-list` and `prompts-list` call methods the router does
not advertise; `dns-rebinding-protection` sends no token (the SDK's check is on, with the SDK's
localhost allow-list).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ivoai.client.knowledge.profiles import ServerProfile, build_sources
from ivoai.client.knowledge.router import RouterHandle, start_router
from tests.conftest import REPO_ROOT, tool_path

SCENARIOS = ["server-initialize", "ping", "tools-list", "server-sse-multiple-streams"]
SUITE = REPO_ROOT / "tools" / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
PRELOAD = REPO_ROOT / "tests" / "server" / "conformance" / "inject-auth.mjs"
SUITE_TIMEOUT_SECONDS = 120


@pytest.fixture(scope="module")
def router() -> Iterator[RouterHandle]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    profile = ServerProfile(
        id="srv_" + "c" * 32,
        alias="nowhere",
        base_url=f"http://127.0.0.1:{port}",
        purpose="nowhere",
        endpoints={"context_mcp": "/v1/mcp/context"},
        features={"context": True},
    )
    with start_router(build_sources([profile]), {profile.id: "unused-credential"}) as handle:
        yield handle


def run_suite(url: str, scenario: str, token: str | None, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    node = tool_path("node")
    if not node.exists() or not SUITE.exists():
        pytest.fail(f"the conformance suite is not installed ({node}, {SUITE}); run scripts/test")
    cmd = [str(node)]
    if token:
        cmd += ["--import", PRELOAD.as_uri()]
    cmd += [str(SUITE), "server", "--url", url, "--scenario", scenario, "-o", str(tmp_path / scenario)]
    env = {**os.environ, "IVOAI_CONFORMANCE_TOKEN": token or ""}
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=SUITE_TIMEOUT_SECONDS, env=env, cwd=tmp_path, check=False
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_scenario_passes_against_the_router(
    router: RouterHandle, scenario: str, tmp_path: Path
) -> None:
    result = run_suite(router.url, scenario, router.token, tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_without_the_capability_token_the_suite_is_refused(router: RouterHandle, tmp_path: Path) -> None:
    result = run_suite(router.url, "server-initialize", None, tmp_path)
    assert result.returncode != 0
