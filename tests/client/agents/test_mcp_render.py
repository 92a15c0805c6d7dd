"""Process-local MCP rendering, checked with the real Codex `-c` parser."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from ivoai.client.agents import mcp_render
from ivoai.client.compression import caveman
from ivoai.client.knowledge.router import READ_TOOLS, STATUS_TOOL, WRITE_TOOLS
from ivoai.common.paths import XdgPaths
from tests.conftest import tool_path

URL = "http://127.0.0.1:43210/mcp"


def _codex(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [str(tool_path("codex")), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_codex_parses_the_rendered_mcp_server_with_a_token_variable_and_approvals(xdg: XdgPaths) -> None:
    args = mcp_render.codex_mcp_args(URL, {*READ_TOOLS, STATUS_TOOL}) + mcp_render.codex_instruction_args()
    proc = _codex("mcp", "list", "--json", *args, home=Path.home())
    assert proc.returncode == 0, proc.stderr
    servers: list[dict[str, Any]] = json.loads(proc.stdout)
    assert [s["name"] for s in servers] == [mcp_render.SERVER_NAME]
    transport = servers[0]["transport"]
    assert transport["type"] == "streamable_http"
    assert transport["url"] == URL
    assert transport["bearer_token_env_var"] == mcp_render.TOKEN_ENV
    assert servers[0]["enabled"] is True
    assert not (Path.home() / ".codex" / "config.toml").exists()


def test_only_read_only_tools_get_automatic_approval() -> None:
    args = mcp_render.codex_mcp_args(URL, READ_TOOLS)
    approved = {a.split(".")[3] for a in args if a.endswith('approval_mode="approve"')}
    assert approved == set(READ_TOOLS)
    assert not approved & WRITE_TOOLS


def test_codex_rejects_a_bad_approval_value_so_the_parser_really_reads_ours(xdg: XdgPaths) -> None:
    bad = [a.replace('"approve"', '"sometimes"') for a in mcp_render.codex_mcp_args(URL, ["context_search"])]
    proc = _codex("mcp", "list", "--json", *bad, home=Path.home())
    assert proc.returncode != 0
    assert "approval_mode" in proc.stderr


def test_codex_parses_the_caveman_provider_and_selects_it(xdg: XdgPaths) -> None:
    proxy = caveman.CavemanProxy(pid=1, port=43211, runtime="/nonexistent")
    args = caveman.codex_config_args(proxy)
    assert 'model_providers.ivoai-caveman.base_url="http://127.0.0.1:43211/chatgpt"' in args
    assert "model_providers.ivoai-caveman.requires_openai_auth=true" in args
    assert _codex("mcp", "list", "--json", *args, home=Path.home()).returncode == 0
    # The same selection without the provider table fails: the parser resolved ours above.
    assert (
        _codex("mcp", "list", "--json", "-c", 'model_provider="ivoai-caveman"', home=Path.home()).returncode
        != 0
    )


def test_instruction_is_a_valid_toml_string_even_with_quotes_and_newlines(xdg: XdgPaths) -> None:
    args = mcp_render.codex_instruction_args('say "memory" first\nthen context \\ web')
    assert _codex("mcp", "list", "--json", *args, home=Path.home()).returncode == 0


def test_claude_gets_a_private_mcp_document_and_the_instruction_process_locally() -> None:
    doc = mcp_render.claude_mcp_document(URL, "tok")
    assert doc == {
        "mcpServers": {
            "ivoai-knowledge": {"type": "http", "url": URL, "headers": {"Authorization": "Bearer tok"}}
        }
    }
    args = mcp_render.claude_args("/run/x/mcp.json")
    assert args[:2] == ["--mcp-config", "/run/x/mcp.json"]
    assert "--strict-mcp-config" not in args
    assert "memory first" in args[3]


def test_claude_accepts_the_rendered_flags(xdg: XdgPaths, tmp_path: Path) -> None:
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps(mcp_render.claude_mcp_document(URL, "tok")))
    cfg.chmod(0o600)
    env = {"HOME": str(Path.home()), "PATH": "/usr/bin:/bin"}
    argv = [str(tool_path("claude")), f"--mcp-config={cfg}", "--append-system-prompt", "x", "--version"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Claude Code" in proc.stdout
