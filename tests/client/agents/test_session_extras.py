"""User MCP servers and memory hooks in launched sessions: process-local, credentials never in argv.

The real `codex` and `claude` check what ivoai passes (Codex's `mcp list --json` and `hooks/list`,
Claude's session init); stand-ins observe argv, environment and `/proc/PID/cmdline` where a process
must stay alive; the memory server is a real gateway over a loopback socket; the model is scripted.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ivoai.client.agents import mcp_render
from ivoai.client.memoryhooks import hosts
from ivoai.client.memoryhooks.flusher import flush_now
from ivoai.common.paths import XdgPaths
from tests.cli.test_launch_isolation import enroll_unreachable_source
from tests.client.agents.standins import finish, install_client, managed_bin, reports, start_ivoai, wait_line
from tests.client.memoryhooks.model_stub import model_stub
from tests.client.memoryhooks.support import Gateway, start_gateway, stored_events, wait_until
from tests.conftest import run_ivoai, tool_path

TOKEN = "user-mcp-" + "T0k3n" * 8


@pytest.fixture(autouse=True)
def _private_data_root(xdg: XdgPaths) -> Iterator[None]:
    """ivoai keeps its data root 0700 (the stand-in installer's mkdir would leave it 0755)."""
    managed_bin(xdg)
    xdg.data.chmod(0o700)
    yield


@pytest.fixture
def gateway(tmp_path: Path, xdg: XdgPaths) -> Iterator[Gateway]:
    gw = start_gateway(tmp_path)
    gw.enroll(xdg, alias="team")
    try:
        yield gw
    finally:
        gw.stop()


def _add_mcp(name: str = "docs", token: str | None = TOKEN) -> None:
    args = ["connect", "mcp", "add", name, f"https://{name}.example.com/mcp"]
    done = run_ivoai(*args, *(["--token-stdin"] if token else []), input_text=(token or "") + "\n")
    assert done.returncode == 0, done.stderr


def _link_real(xdg: XdgPaths, name: str) -> None:
    (managed_bin(xdg) / name).symlink_to(tool_path(name))


def _env(tmp_path: Path, mode: str = "exit:0", keys: str = "") -> dict[str, str]:
    return dict(
        os.environ, STANDIN_REPORT=str(tmp_path / "r.ndjson"), STANDIN_MODE=mode, STANDIN_ENV_KEYS=keys
    )


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def test_a_user_mcp_entry_reaches_codex_mcp_list_under_ivoai_codex(xdg: XdgPaths) -> None:
    _add_mcp()
    _link_real(xdg, "codex")
    done = run_ivoai("codex", "--", "mcp", "list", "--json")
    assert done.returncode == 0, done.stderr
    [server] = json.loads(done.stdout)
    assert server["name"] == "docs"
    assert server["transport"]["url"] == "https://docs.example.com/mcp"
    assert server["transport"]["bearer_token_env_var"].startswith(mcp_render.USER_TOKEN_ENV_PREFIX)
    assert server["auth_status"] == "bearer_token"


def test_codex_gets_the_user_token_only_in_its_environment_never_in_argv(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    _add_mcp()
    install_client(xdg, "codex")
    [entry_id] = [
        e["id"] for e in json.loads(run_ivoai("connect", "mcp", "list", "--json").stdout)["entries"]
    ]
    variable = mcp_render.user_token_env(entry_id)
    proc = start_ivoai("codex", env=_env(tmp_path, "wait", variable))
    try:
        wait_line(proc, "ready")
        [start] = reports(tmp_path / "r.ndjson")
        assert TOKEN.encode() not in _cmdline(start["pid"])
        assert TOKEN.encode() not in _cmdline(proc.pid)
        assert start["env"][variable] == TOKEN
        assert f'mcp_servers.docs.bearer_token_env_var="{variable}"' in start["argv"]
        proc.terminate()
    finally:
        finish(proc)


def test_claude_gets_user_servers_in_a_private_config_file_the_real_claude_loads(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    _add_mcp()
    install_client(xdg, "claude")
    proc = start_ivoai("claude", env=_env(tmp_path, "wait"))
    try:
        wait_line(proc, "ready")
        [start] = reports(tmp_path / "r.ndjson")
        assert TOKEN.encode() not in _cmdline(start["pid"])
        [flag] = [a for a in start["argv"] if a.startswith("--mcp-config=")]
        path = Path(flag.partition("=")[2])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        doc = json.loads(path.read_text())
        assert doc == {
            "mcpServers": {
                "docs": {
                    "type": "http",
                    "url": "https://docs.example.com/mcp",
                    "headers": {"Authorization": f"Bearer {TOKEN}"},
                }
            }
        }
        saved = tmp_path / "mcp-user.json"
        saved.write_text(path.read_text())
        proc.terminate()
    finally:
        finish(proc)
    assert not path.exists()  # removed with the session
    settings = Path.home() / ".claude" / "settings.json"
    settings.parent.mkdir(mode=0o700)
    settings.write_text('{"apiKeyHelper": "echo stub-only-key"}')  # a key for the scripted model only
    with model_stub() as url:
        done = subprocess.run(
            [
                str(tool_path("claude")),
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                f"--mcp-config={saved}",
                "hi",
            ],
            env=dict(os.environ, ANTHROPIC_BASE_URL=url),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    init = json.loads(done.stdout.splitlines()[0])
    assert init["subtype"] == "init"
    assert "docs" in {s["name"] for s in init["mcp_servers"]}


def test_mcp_selection_flags_pick_attach_or_refuse(xdg: XdgPaths, tmp_path: Path) -> None:
    _add_mcp("docs")
    _add_mcp("tickets", token=None)
    assert run_ivoai("connect", "mcp", "disable", "tickets").returncode == 0
    install_client(xdg, "codex")
    install_client(xdg, "opencode")
    env = _env(tmp_path)
    assert run_ivoai("codex", env=env).returncode == 0
    assert run_ivoai("codex", "--no-user-mcp", env=env).returncode == 0
    unknown = run_ivoai("codex", "--mcp", "nope", env=env)
    disabled = run_ivoai("codex", "--mcp", "tickets", env=env)
    direct_only = run_ivoai("opencode", "--mcp", "docs", env=env)
    both = run_ivoai("codex", "--mcp", "docs", "--no-user-mcp", env=env)
    assert [r.returncode for r in (unknown, disabled, direct_only, both)] == [2, 2, 2, 2]
    assert "docs, tickets" in unknown.stderr and "ivoai connect mcp enable tickets" in disabled.stderr
    first, second = reports(tmp_path / "r.ndjson")
    assert any("mcp_servers.docs.url" in a for a in first["argv"])
    assert not any("tickets" in a for a in first["argv"])  # disabled: not attached by default
    assert not any("mcp_servers" in a for a in second["argv"])


def _record(xdg: XdgPaths) -> dict[str, object]:
    [path] = list(xdg.sessions_dir.glob("ses_*.json"))
    record: dict[str, object] = json.loads(path.read_text())
    path.unlink()
    return record


def test_user_servers_never_change_the_compression_decision(xdg: XdgPaths, tmp_path: Path) -> None:
    _add_mcp()
    install_client(xdg, "codex")
    assert run_ivoai("codex", env=_env(tmp_path)).returncode == 0
    alone = _record(xdg)  # caveman requested, not installed: a fallback, never a knowledge bypass
    assert (alone["bypass"], alone["authoritative_sources"]) == (False, 0)
    enroll_unreachable_source(xdg)
    assert run_ivoai("codex", env=_env(tmp_path)).returncode == 0
    routed = _record(xdg)
    assert (routed["bypass"], routed["bypass_reason"]) == (True, "authoritative_knowledge")
    assert routed["authoritative_sources"] == 1


def test_session_hooks_are_added_per_process_and_skipped_where_the_managed_installation_runs_them(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    enroll_unreachable_source(xdg)
    install_client(xdg, "codex")
    keys = "IVOAI_MEMORY_HOOK_SOURCE,IVOAI_MEMORY_HOOK_ROUTER,IVOAI_KNOWLEDGE_TOKEN_HOOKS"
    assert run_ivoai("codex", env=_env(tmp_path, keys=keys)).returncode == 0
    assert run_ivoai("codex", "--no-memory-hooks", env=_env(tmp_path, keys=keys)).returncode == 0
    assert run_ivoai("memory", "hooks", "install", "--client", "codex").returncode == 0
    assert run_ivoai("codex", env=_env(tmp_path, keys=keys)).returncode == 0
    wired, off, managed = reports(tmp_path / "r.ndjson")
    expected, argv = hosts.codex_config_args(), wired["argv"]
    assert any(argv[i : i + len(expected)] == expected for i in range(len(argv)))
    assert wired["env"]["IVOAI_MEMORY_HOOK_SOURCE"] == "team"
    assert wired["env"]["IVOAI_MEMORY_HOOK_ROUTER"].startswith("http://127.0.0.1:")
    token = wired["env"]["IVOAI_KNOWLEDGE_TOKEN_HOOKS"]
    assert token and all(token not in a for a in wired["argv"])
    assert (
        not any(a.startswith("hooks.") for a in off["argv"])
        and off["env"]["IVOAI_MEMORY_HOOK_SOURCE"] is None
    )
    assert not any(a.startswith("hooks.") for a in managed["argv"])  # the user's hooks.json runs them
    assert managed["env"]["IVOAI_MEMORY_HOOK_SOURCE"] == "team"


def _stub_codex_args(url: str) -> list[str]:
    return [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "-m",
        "test-model",
        "-c",
        "model_provider=stub",
        "-c",
        'model_providers.stub.name="stub"',
        "-c",
        f'model_providers.stub.base_url="{url}/v1"',
        "-c",
        'model_providers.stub.env_key="STUB_KEY"',
        "-c",
        'model_providers.stub.wire_api="responses"',
    ]


def test_codex_session_hooks_run_once_trusted_and_feed_the_memory_server(
    xdg: XdgPaths, gateway: Gateway, tmp_path: Path
) -> None:
    _link_real(xdg, "codex")
    codex_home = Path.home() / ".codex"
    codex_home.mkdir(mode=0o700)
    (codex_home / "config.toml").write_text('model = "test-model"\n')
    env = dict(os.environ, STUB_KEY="stub-only")
    with model_stub() as url:
        first = run_ivoai("codex", "--", *_stub_codex_args(url), "first turn", env=env)
        assert first.returncode == 0, first.stderr
        assert "open `/hooks` in Codex" in first.stderr  # said once
        assert stored_events(gateway) == []  # not trusted yet: Codex skipped them
        # The user reviews and trusts ivoai's session hooks in Codex's /hooks (what it writes, below).
        listed = hosts.codex_hook_list(str(tool_path("codex")), env, extra_args=hosts.codex_config_args())
        with (codex_home / "config.toml").open("a") as fh:
            for hook in listed:
                if hook["source"] == "sessionFlags":
                    fh.write(f'\n[hooks.state."{hook["key"]}"]\ntrusted_hash = "{hook["currentHash"]}"\n')
        second = run_ivoai("codex", "--", *_stub_codex_args(url), "second turn", env=env)
        assert second.returncode == 0, second.stderr
        assert "open `/hooks`" not in second.stderr
    flush_now(xdg)
    wanted = {"session_start", "user_prompt", "stop"}
    wait_until(lambda: wanted <= {e["event"] for e in stored_events(gateway)}, what="codex's hook events")
    events = stored_events(gateway)
    assert [e["prompt"] for e in events if e["event"] == "user_prompt"] == ["second turn"]
    assert {e["agent"] for e in events} == {"codex"}


def test_claude_session_hooks_feed_the_memory_server_without_touching_its_settings(
    xdg: XdgPaths, gateway: Gateway, tmp_path: Path
) -> None:
    _link_real(xdg, "claude")
    settings = Path.home() / ".claude" / "settings.json"
    settings.parent.mkdir(mode=0o700)
    settings.write_text('{"apiKeyHelper": "echo stub-only-key"}')  # a key for the scripted model only
    before = settings.read_bytes()
    with model_stub() as url:
        done = run_ivoai(
            "claude", "--", "-p", "keep the quokka notes", env=dict(os.environ, ANTHROPIC_BASE_URL=url)
        )
    assert done.returncode == 0, done.stderr
    assert settings.read_bytes() == before
    flush_now(xdg)
    wanted = {"session_start", "user_prompt", "stop", "session_end"}
    wait_until(lambda: wanted <= {e["event"] for e in stored_events(gateway)}, what="claude's hook events")
    events = stored_events(gateway)
    assert [e["prompt"] for e in events if e["event"] == "user_prompt"] == ["keep the quokka notes"]
    assert {e["agent"] for e in events} == {"claude"}
