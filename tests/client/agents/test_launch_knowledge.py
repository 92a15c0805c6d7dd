"""Knowledge sources attached process-locally: Codex flags + token variable, Claude private MCP file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from ivoai.client.agents import mcp_render
from ivoai.common.paths import XdgPaths
from tests.cli.test_launch_isolation import enroll_unreachable_source
from tests.client.agents.standins import finish, install_client, reports, start_ivoai, wait_line
from tests.conftest import run_ivoai, tool_path


def _env(tmp_path: Path, mode: str = "exit:0") -> dict[str, str]:
    return dict(
        os.environ,
        STANDIN_REPORT=str(tmp_path / "r.ndjson"),
        STANDIN_MODE=mode,
        STANDIN_ENV_KEYS=f"{mcp_render.TOKEN_ENV}",
    )


def test_codex_gets_the_router_as_config_overrides_and_the_token_only_in_its_environment(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    enroll_unreachable_source(xdg)
    install_client(xdg, "codex")
    result = run_ivoai("codex", "--knowledge-source", "team", "--", "exec", "hi", env=_env(tmp_path))
    assert result.returncode == 0, result.stderr
    [start] = reports(tmp_path / "r.ndjson")
    argv: list[str] = start["argv"]
    token = start["env"][mcp_render.TOKEN_ENV]
    assert token and all(token not in a for a in argv)
    assert argv[-2:] == ["exec", "hi"]
    assert any(a.startswith("developer_instructions=") for a in argv)
    # The real Codex parses exactly what ivoai passed.
    proc = subprocess.run(
        [str(tool_path("codex")), "mcp", "list", "--json", *argv[:-2]],
        capture_output=True,
        text=True,
        timeout=60,
        env={"HOME": str(Path.home()), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    [server] = json.loads(proc.stdout)
    assert server["name"] == mcp_render.SERVER_NAME
    assert server["transport"]["url"].startswith("http://127.0.0.1:")
    assert server["transport"]["bearer_token_env_var"] == mcp_render.TOKEN_ENV


def test_claude_gets_a_private_mcp_file_that_is_removed_with_the_session(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    enroll_unreachable_source(xdg)
    install_client(xdg, "claude")
    proc = start_ivoai("claude", env=_env(tmp_path, mode="wait"))
    try:
        wait_line(proc, "ready")
        [start] = reports(tmp_path / "r.ndjson")
        [flag] = [a for a in start["argv"] if a.startswith("--mcp-config=")]
        path = Path(flag.partition("=")[2])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        doc = json.loads(path.read_text())
        assert doc["mcpServers"][mcp_render.SERVER_NAME]["url"].startswith("http://127.0.0.1:")
        assert start["env"][mcp_render.TOKEN_ENV] is None
        assert "--strict-mcp-config" not in start["argv"]
        proc.terminate()
    finally:
        code, _, err = finish(proc)
    assert code == 143, err
    assert not path.exists() and not path.parent.exists()


def test_an_unknown_knowledge_source_is_a_usage_error_and_nothing_starts(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    enroll_unreachable_source(xdg)
    install_client(xdg, "codex")
    result = run_ivoai("codex", "--knowledge-source", "nope", env=_env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "nope" in result.stderr
    assert reports(tmp_path / "r.ndjson") == []


def test_no_knowledge_keeps_the_requested_provider_decision_free_of_the_bypass(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    enroll_unreachable_source(xdg)
    install_client(xdg, "codex")
    result = run_ivoai("codex", "--no-knowledge", env=_env(tmp_path))
    assert result.returncode == 0, result.stderr
    [start] = reports(tmp_path / "r.ndjson")
    assert start["argv"] == [] and start["env"][mcp_render.TOKEN_ENV] is None
    [record_path] = list(xdg.sessions_dir.glob("ses_*.json"))
    record = json.loads(record_path.read_text())
    assert record["bypass"] is False and record["knowledge_sources"] == []


def test_opencode_is_direct_only_and_refuses_an_explicit_knowledge_source(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    enroll_unreachable_source(xdg)
    install_client(xdg, "opencode")
    assert run_ivoai("opencode", env=_env(tmp_path)).returncode == 0
    result = run_ivoai("opencode", "--knowledge-source", "team", env=_env(tmp_path))
    assert result.returncode == 2
    assert "direct-only" in result.stderr
    assert len(reports(tmp_path / "r.ndjson")) == 1
