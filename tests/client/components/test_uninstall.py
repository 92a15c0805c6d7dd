"""`ivoai uninstall`: exactly what ivoai recorded goes; the user's tools, settings and logins stay.

Vendor logins are watched with inotify while the real `ivoai uninstall` process runs: not one open
or read of `~/.codex/auth.json` or Claude's credentials file is allowed, not just "same bytes after".
"""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ivoai.client.components.manifest import TEST_MANIFEST_ENV
from ivoai.client.config.ownership import Ownership, OwnershipManifest
from ivoai.client.sessions.procinfo import start_marker
from ivoai.common.fsio import atomic_write
from ivoai.common.paths import XdgPaths
from tests.client.components.conftest import World
from tests.client.components.helpers import sha256, tree_bytes
from tests.conftest import run_ivoai

IN_ACCESS, IN_MODIFY, IN_ATTRIB, IN_OPEN = 0x1, 0x2, 0x4, 0x20
IN_DELETE_SELF, IN_MOVE_SELF = 0x400, 0x800
USER_HOOK = {"matcher": "", "hooks": [{"type": "command", "command": "echo mine"}]}
IVOAI_HOOK = {"matcher": "", "hooks": [{"type": "command", "command": "ivoai hook session-start"}]}
IVOAI_HOOK_2 = {"matcher": "", "hooks": [{"type": "command", "command": "ivoai hook stop"}]}
CODEX_CONFIG = (
    '# my codex settings\nmodel = "o3"\n\n[mcp_servers.mine]\ncommand = "my-mcp"\n\n'
    '[hooks.ivoai]\ncommand = "ivoai hook codex"\n'
)


@contextmanager
def watch(*paths: Path) -> Iterator[list[int]]:
    """inotify watches on `paths`; yields a list that receives the event masks seen."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert fd >= 0
    events: list[int] = []
    try:
        for path in paths:
            mask = IN_ACCESS | IN_MODIFY | IN_ATTRIB | IN_OPEN | IN_DELETE_SELF | IN_MOVE_SELF
            assert libc.inotify_add_watch(fd, str(path).encode(), mask) >= 0
        yield events
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            data = b""
        offset = 0
        while offset < len(data):  # struct inotify_event: wd, mask, cookie, len, name[len]
            events.append(int.from_bytes(data[offset + 4 : offset + 8], "little"))
            offset += 16 + int.from_bytes(data[offset + 12 : offset + 16], "little")
    finally:
        os.close(fd)


@pytest.fixture
def installed(xdg: XdgPaths, world: World, tmp_path: Path) -> dict[str, Path]:
    """ivoai with a managed tool, hook entries in vendor configs, a pre-existing codex and vendor logins."""
    home = Path(os.environ["HOME"])
    (home / ".codex").mkdir()
    (home / ".claude" / "hooks").mkdir(parents=True)
    files = {
        "auth": home / ".codex" / "auth.json",
        "credentials": home / ".claude" / ".credentials.json",
        "claude_json": home / ".claude.json",
        "settings": home / ".claude" / "settings.json",
        "codex_config": home / ".codex" / "config.toml",
        "hook_script": home / ".claude" / "hooks" / "ivoai-memory.sh",
        "edited_script": home / ".claude" / "hooks" / "ivoai-edited.sh",
        "own_codex": tmp_path / "userbin" / "codex",
    }
    files["auth"].write_text('{"tokens": "the user\'s ChatGPT login"}')
    files["credentials"].write_text('{"claudeAiOauth": "the user\'s Claude login"}')
    files["claude_json"].write_text('{"numStartups": 3}')
    edited = dict(IVOAI_HOOK_2, matcher="changed by the user")
    settings = {"theme": "dark", "hooks": {"SessionStart": [USER_HOOK, IVOAI_HOOK], "Stop": [edited]}}
    files["settings"].write_text(json.dumps(settings, indent=2))
    files["codex_config"].write_text(CODEX_CONFIG)
    files["hook_script"].write_text("#!/bin/sh\nexec ivoai hook memory\n")
    files["edited_script"].write_text("#!/bin/sh\necho edited by the user\n")
    files["own_codex"].parent.mkdir()
    files["own_codex"].write_text("#!/bin/sh\necho users-own-codex\n")
    files["own_codex"].chmod(0o755)
    ownership = OwnershipManifest(xdg)
    record = ownership.record_config_entry
    record("memory-hooks", files["settings"], owner="hooks", format="json",
           pointer=["hooks", "SessionStart"], value=IVOAI_HOOK, mode="element")  # fmt: skip
    record("memory-hooks", files["settings"], owner="hooks", format="json",
           pointer=["hooks", "Stop"], value=IVOAI_HOOK_2, mode="element")  # fmt: skip
    record("codex-hooks", files["codex_config"], owner="hooks", format="toml",
           pointer=["hooks", "ivoai"], value={"command": "ivoai hook codex"})  # fmt: skip
    ownership.record_file(
        "memory-hooks", files["hook_script"], owner="hooks", sha256=sha256(files["hook_script"].read_bytes())
    )
    ownership.record_file("memory-hooks", files["edited_script"], owner="hooks", sha256="0" * 64)
    ownership.record("codex", files["own_codex"], Ownership.PRE_EXISTING)
    ownership.record("tool", xdg.data / "bin" / "tool", Ownership.MANAGED)  # (world replaced setup's file)
    return files


def _env(world: World) -> dict[str, str]:
    return {**os.environ, TEST_MANIFEST_ENV: str(world.m1.path)}


def test_dry_run_lists_exactly_what_would_go_and_changes_nothing(
    xdg: XdgPaths, world: World, installed: dict[str, Path]
) -> None:
    home = Path(os.environ["HOME"])
    before = tree_bytes(home, xdg.config, xdg.data, xdg.state, xdg.cache, installed["own_codex"].parent)
    proc = run_ivoai("uninstall", "--dry-run", "--json", env=_env(world))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["dry_run"] is True
    actions = {(i["kind"], i["path"], tuple(i["pointer"])): i["action"] for i in doc["items"]}
    settings, codex_config = str(installed["settings"]), str(installed["codex_config"])
    assert actions[("config_entry", settings, ("hooks", "SessionStart"))] == "remove"
    assert actions[("config_entry", settings, ("hooks", "Stop"))] == "keep"  # the user changed it
    assert actions[("config_entry", codex_config, ("hooks", "ivoai"))] == "remove"
    assert actions[("file", str(installed["hook_script"]), ())] == "remove"
    assert actions[("file", str(installed["edited_script"]), ())] == "keep"
    assert actions[("executable", str(installed["own_codex"]), ())] == "keep"
    assert actions[("executable", str(xdg.data / "bin" / "tool"), ())] == "remove"
    for root in (xdg.cache, xdg.data, xdg.config, xdg.state):
        if root.exists():
            assert actions[("root", str(root), ())] == "remove"
    for vendor in (home / ".codex", home / ".claude", home / ".claude.json"):
        assert actions[("vendor_state", str(vendor), ())] == "keep"
    assert (
        tree_bytes(home, xdg.config, xdg.data, xdg.state, xdg.cache, installed["own_codex"].parent) == before
    )


def test_uninstall_removes_owned_things_only_and_never_opens_a_vendor_login(
    xdg: XdgPaths, world: World, installed: dict[str, Path]
) -> None:
    keep = {
        name: installed[name].read_bytes() for name in ("auth", "credentials", "claude_json", "own_codex")
    }
    env = _env(world)
    env["PATH"] = f"{installed['own_codex'].parent}{os.pathsep}{env['PATH']}"  # the user's codex is on PATH
    with watch(installed["auth"], installed["credentials"]) as events:
        proc = run_ivoai("uninstall", "--yes", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert events == [], f"a vendor login was touched: inotify masks {events}"
    for name, data in keep.items():
        assert installed[name].read_bytes() == data
    for root in (xdg.cache, xdg.data, xdg.config, xdg.state):
        assert not root.exists()
    settings = json.loads(installed["settings"].read_text())
    assert settings["theme"] == "dark"
    assert settings["hooks"]["SessionStart"] == [USER_HOOK]  # only ivoai's element went
    assert settings["hooks"]["Stop"][0]["matcher"] == "changed by the user"  # changed since: kept
    # ivoai's table is gone; every other byte (comments, the user's MCP server) is as it was.
    assert installed["codex_config"].read_text() == CODEX_CONFIG.replace(
        '[hooks.ivoai]\ncommand = "ivoai hook codex"\n', ""
    )
    assert not installed["hook_script"].exists()
    assert installed["edited_script"].exists()
    assert os.access(installed["own_codex"], os.X_OK)


def test_uninstall_without_yes_outside_a_terminal_is_refused(world: World, xdg: XdgPaths) -> None:
    proc = run_ivoai("uninstall", env=_env(world))
    assert proc.returncode == 2
    assert "pass --yes" in proc.stderr
    assert xdg.data.exists()


def test_uninstall_refuses_while_a_session_is_live(world: World, xdg: XdgPaths) -> None:
    sid = "ses_" + "a" * 32
    record = {
        "schema": 1,
        "id": sid,
        "executor": "codex",
        "pid": os.getpid(),  # this test process: alive, with its own start marker
        "pid_start": start_marker(os.getpid()),
        "started_at": 1.0,
        "requested_provider": "direct",
        "effective_provider": "direct",
        "provider_source": "flag",
        "state": "running",
    }
    atomic_write(xdg.state, xdg.sessions_dir / f"{sid}.json", json.dumps(record).encode())
    proc = run_ivoai("uninstall", "--yes", env=_env(world))
    assert proc.returncode == 1
    assert f"session {sid} is live" in proc.stderr
    assert xdg.data.exists() and xdg.state.exists()


def test_uninstall_undoes_the_real_memory_hook_installation_byte_for_byte(
    world: World, xdg: XdgPaths
) -> None:
    """`ivoai memory hooks install` records its edits as `integrations`; uninstall undoes exactly those."""
    home = Path(os.environ["HOME"])
    claude = home / ".claude" / "settings.json"
    codex = home / ".codex" / "hooks.json"
    claude.parent.mkdir(mode=0o700)
    codex.parent.mkdir(mode=0o700)
    claude_text = '{\n\t"theme" :  "dark",\n\t"hooks": {"Stop": [' + json.dumps(USER_HOOK) + "]}\n}\n"
    codex_text = '{\r\n  "hooks": {}\r\n}\r\n'
    claude.write_text(claude_text)
    codex.write_bytes(codex_text.encode())
    for client in ("claude", "codex"):
        done = run_ivoai("memory", "hooks", "install", "--client", client, "--json", env=_env(world))
        assert done.returncode == 0, done.stderr
    assert claude.read_text() != claude_text and codex.read_bytes() != codex_text.encode()
    plan = json.loads(run_ivoai("uninstall", "--dry-run", "--json", env=_env(world)).stdout)
    planned = {(i["kind"], i["path"], i["action"]) for i in plan["items"]}
    assert ("integration", str(claude), "remove") in planned
    assert ("integration", str(codex), "remove") in planned
    proc = run_ivoai("uninstall", "--yes", "--json", env=_env(world))
    assert proc.returncode == 0, proc.stderr
    assert claude.read_text() == claude_text
    assert codex.read_bytes() == codex_text.encode()
    assert not xdg.state.exists()
