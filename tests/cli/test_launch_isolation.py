"""Every launch mode leaves the official clients' own configuration untouched (~/.codex, ~/.claude).

Modes: Direct, Caveman (stand-in proxy), Headroom (the real headroom-ai `wrap`), and knowledge
sources attached through the per-session router (which forces Direct: the fidelity bypass).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ivoai.client.compression import caveman
from ivoai.client.config.secrets import SecretsStore
from ivoai.client.connections.registry import ConnectionRegistry
from ivoai.client.knowledge.profiles import ServerProfile
from ivoai.common.paths import XdgPaths
from tests.client.agents.standins import install_caveman, tree_digest
from tests.conftest import run_ivoai, tool_path

CODEX_CONFIG = 'model = "o3"\n\n[mcp_servers.mine]\ncommand = "my-mcp"\n'
CLAUDE_SETTINGS = '{"theme": "dark", "permissions": {"allow": []}}\n'


def _populate_homes(home: Path) -> None:
    """What a logged-in user has: client config and credentials files ivoai must never touch."""
    (home / ".codex").mkdir(mode=0o700)
    (home / ".codex" / "config.toml").write_text(CODEX_CONFIG)
    (home / ".codex" / "auth.json").write_text('{"tokens": "not-a-real-token"}')
    (home / ".claude").mkdir(mode=0o700)
    (home / ".claude" / "settings.json").write_text(CLAUDE_SETTINGS)
    (home / ".claude.json").write_text('{"mcpServers": {}}\n')


def _snapshot(home: Path) -> tuple[dict[str, str], dict[str, str], str]:
    return tree_digest(home / ".codex"), tree_digest(home / ".claude"), (home / ".claude.json").read_text()


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{tool_path('codex').parent}:/usr/bin:/bin"
    env.update(extra)
    return env


def _set_provider(xdg: XdgPaths, provider: str) -> None:
    xdg.config.mkdir(mode=0o700, parents=True, exist_ok=True)
    xdg.config_file.write_text(f'[compression]\nprovider = "{provider}"\nsource = "explicit"\n')
    xdg.config_file.chmod(0o600)


def _record(xdg: XdgPaths) -> dict[str, object]:
    paths = sorted(xdg.sessions_dir.glob("ses_*.json"), key=lambda p: p.stat().st_mtime)
    doc: dict[str, object] = json.loads(paths[-1].read_text())
    return doc


def enroll_unreachable_source(xdg: XdgPaths, alias: str = "team") -> ServerProfile:
    """Register an ivoai server (memory + context) with a credential; its origin need not answer."""
    profile = ServerProfile(
        id="srv_" + "a1" * 8,
        alias=alias,
        base_url="http://127.0.0.1:9",
        purpose=alias,
        endpoints={"memory_mcp": "/memory/mcp", "context_mcp": "/context/mcp"},
        features={"memory": True, "context": True},
        scopes=("memory:read", "context:read"),
    )
    with ConnectionRegistry(xdg).update() as state:
        state.servers.append(profile)
    SecretsStore(xdg).put(profile.id, "ivc_" + "z" * 40)
    return profile


@pytest.mark.parametrize("executor", ["codex", "claude"])
def test_direct_caveman_and_knowledge_modes_leave_client_homes_unchanged(
    xdg: XdgPaths, executor: str
) -> None:
    home = Path.home()
    _populate_homes(home)
    before = _snapshot(home)
    digest = install_caveman(xdg)
    direct = run_ivoai(executor, "--direct", "--", "--version", env=_env())
    assert direct.returncode == 0, direct.stderr
    cave = run_ivoai(executor, "--", "--version", env=_env(**{caveman.TEST_PIN_ENV: digest}))
    assert cave.returncode == 0, cave.stderr
    assert _record(xdg)["effective_provider"] == "caveman"
    enroll_unreachable_source(xdg)
    knowledge = run_ivoai(executor, "--", "--version", env=_env(**{caveman.TEST_PIN_ENV: digest}))
    assert knowledge.returncode == 0, knowledge.stderr
    record = _record(xdg)
    assert record["effective_provider"] == "direct" and record["requested_provider"] == "caveman"
    assert record["bypass"] is True and record["bypass_reason"] == "authoritative_knowledge"
    assert record["authoritative_sources"] == 1 and record["knowledge_sources"]
    assert direct.stdout == cave.stdout == knowledge.stdout
    assert _snapshot(home) == before


def test_headroom_wrap_runs_the_real_client_and_leaves_client_homes_unchanged(xdg: XdgPaths) -> None:
    executor = "codex"  # `wrap claude` differs only in the variable it sets; one real wrap keeps the budget
    headroom = tool_path("headroom")
    if not headroom.exists():
        pytest.fail(f"headroom-ai is not installed at {headroom}; run scripts/test")
    home = Path.home()
    _populate_homes(home)
    before = _snapshot(home)
    (xdg.data / "bin").mkdir(parents=True, mode=0o700)
    (xdg.data / "bin" / "headroom").symlink_to(headroom)
    _set_provider(xdg, "headroom")
    real = subprocess.run(
        [str(tool_path(executor)), "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    result = run_ivoai(executor, "--", "--version", env=_env())
    assert result.returncode == 0, result.stderr
    assert real.stdout.strip() in result.stdout
    record = _record(xdg)
    assert record["requested_provider"] == record["effective_provider"] == "headroom"
    assert record["provider_source"] == "explicit"
    assert _snapshot(home) == before
    # `headroom wrap` leaves its detached proxy running (15 minutes by its own watchdog); ivoai
    # stops the one of this session when the client exits.
    assert _processes_of_session(str(record["id"])) == []


def _processes_of_session(session_id: str) -> list[str]:
    """Command lines of live processes whose environment carries this ivoai session's ID."""
    wanted = f"IVOAI_SESSION_ID={session_id}".encode()
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if wanted in environ:
            found.append(cmdline.decode(errors="replace"))
    return found
