"""The managed installation in the hosts' own files, checked with the real `codex` and `claude`."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ivoai.client.config.ownership import OwnershipManifest
from ivoai.client.memoryhooks import hosts, install
from ivoai.client.memoryhooks.flusher import flush_now
from ivoai.client.memoryhooks.locations import wrapper_path
from ivoai.common.paths import XdgPaths
from tests.client.memoryhooks.model_stub import model_stub
from tests.client.memoryhooks.support import Gateway, start_gateway, stored_events, wait_until
from tests.conftest import run_ivoai, tool_path

# A user's file with formatting no JSON serializer reproduces: tabs, odd spacing, a unicode escape,
# an unrelated hook of their own, and key order that is not sorted.
CLAUDE_SETTINGS = (
    '{\n\t"model" :  "opus",\n\t"env": {"GREETING": "ol\\u00e1"},\n'
    '\t"hooks": {\n\t\t"Stop": [ { "hooks": [ { "type": "command", "command": "notify-send done" } ] } ]'
    "\n\t},\n"
    '\t"permissions": {"allow": ["Bash(ls:*)"]}\n}\n'
)
CODEX_HOOKS = (
    '{\r\n  "hooks": {\r\n    "PreToolUse": [{"matcher": "Bash", '
    '"hooks": [{"type": "command", "command": "audit"}]}]\r\n  }\r\n}\r\n'
)


@pytest.fixture
def gateway(tmp_path: Path, xdg: XdgPaths) -> Iterator[Gateway]:
    gw = start_gateway(tmp_path)
    gw.enroll(xdg)
    try:
        yield gw
    finally:
        gw.stop()


def _ivoai(*args: str) -> dict[str, object]:
    done = run_ivoai("memory", "hooks", *args, "--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize(
    ("client", "name", "original"),
    [("claude", "settings.json", CLAUDE_SETTINGS), ("codex", "hooks.json", CODEX_HOOKS)],
)
def test_unrelated_settings_survive_install_and_uninstall_byte_for_byte(
    xdg: XdgPaths, client: str, name: str, original: str
) -> None:
    path = Path.home() / (".claude" if client == "claude" else ".codex") / name
    path.parent.mkdir(mode=0o700)
    path.write_bytes(original.encode())
    path.chmod(0o640)
    _ivoai("install", "--client", client)
    installed = json.loads(path.read_text())
    before = json.loads(original)
    for key, value in before.items():
        if key != "hooks":
            assert installed[key] == value
    for event, groups in before["hooks"].items():
        assert installed["hooks"][event][: len(groups)] == groups  # the user's own hooks stay first
    assert path.read_bytes().startswith(original.encode()[: original.index('"hooks"')])
    assert (b"\r\n" in path.read_bytes()) == (client == "codex")  # the file's own line endings
    assert oct(path.stat().st_mode & 0o777) == "0o640"
    assert install.status(client, probe=False)["installed"] is True
    _ivoai("uninstall", "--client", client)
    assert path.read_bytes() == original.encode()
    assert OwnershipManifest(xdg).integrations(install.COMPONENT) == []
    assert not Path(wrapper_path()).exists()


def test_uninstall_removes_only_what_the_manifest_records_after_the_user_edited_the_file(
    xdg: XdgPaths,
) -> None:
    path = Path.home() / ".claude" / "settings.json"
    _ivoai("install", "--client", "claude")  # creates the file
    doc = json.loads(path.read_text())
    mine = {"hooks": [{"type": "command", "command": "my-own-logger"}]}
    doc["hooks"]["SessionStart"].append(mine)  # the user adds a hook into ivoai's array…
    doc["theme"] = "dark"  # …a setting, and re-serializes the file their own way
    # A definition that looks like ivoai's but was never recorded by this installation.
    lookalike = {"hooks": [{"type": "command", "command": hosts.hook_command("Stop", "codex"), "timeout": 1}]}
    doc["hooks"]["Stop"].append(lookalike)
    path.write_text(json.dumps(doc, indent=4, sort_keys=True))
    _ivoai("uninstall", "--client", "claude")
    left = json.loads(path.read_text())
    assert left["theme"] == "dark"
    assert left["hooks"]["SessionStart"] == [mine]
    assert left["hooks"]["Stop"] == [lookalike]
    assert [e for e in left["hooks"] if e not in ("SessionStart", "Stop")] == []


def test_a_file_ivoai_created_is_deleted_again_when_nothing_else_was_added(xdg: XdgPaths) -> None:
    path = Path.home() / ".codex" / "hooks.json"
    _ivoai("install", "--client", "codex")
    assert json.loads(path.read_text())["hooks"].keys() == set(hosts.EVENTS)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    _ivoai("uninstall", "--client", "codex")
    assert not path.exists()


def _trust_as_the_user_would(codex_home: Path, listed: list[dict[str, object]]) -> None:
    """What Codex's `/hooks` review writes when the user trusts each hook (ivoai never does this)."""
    config = codex_home / "config.toml"
    with config.open("a") as fh:
        for hook in listed:
            fh.write(f'\n[hooks.state."{hook["key"]}"]\ntrusted_hash = "{hook["currentHash"]}"\n')


def test_real_codex_lists_the_installed_hooks_and_trust_survives_repair(xdg: XdgPaths) -> None:
    codex = str(tool_path("codex"))
    home = Path.home() / ".codex"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text('model = "o3"\n')
    env = dict(os.environ, PATH=f"{Path(codex).parent}:{os.environ['PATH']}")
    install.install("codex", env=env)
    listed = [h for h in hosts.codex_hook_list(codex, env) if h["source"] == "user"]
    assert sorted(hosts.CODEX_LIST_NAMES[h["eventName"]] for h in listed) == sorted(hosts.EVENTS)
    assert {h["trustStatus"] for h in listed} == {"untrusted"}
    assert {h["command"] for h in listed} == {hosts.hook_command(e, "codex") for e in hosts.EVENTS}
    assert install.status("codex", env=env)["trusted"] is False
    _trust_as_the_user_would(home, listed)
    assert install.status("codex", env=env)["trusted"] is True
    before = (home / "hooks.json").read_bytes()
    Path(wrapper_path()).write_text("#!/bin/sh\nexit 0\n")  # a stale wrapper (ivoai moved)
    result = install.repair("codex", env=env)
    assert result.wrapper_rewritten and result.added == []
    assert (home / "hooks.json").read_bytes() == before  # definitions untouched: Codex keeps its trust
    assert install.status("codex", env=env)["trusted"] is True
    report = install.validate("codex", env=env)
    assert report["ok"], report


def test_real_claude_runs_the_installed_hooks_into_the_memory_server(
    xdg: XdgPaths, gateway: Gateway, tmp_path: Path
) -> None:
    settings = Path.home() / ".claude" / "settings.json"
    settings.parent.mkdir(mode=0o700)
    settings.write_text('{"model": "sonnet"}\n')
    _ivoai("install", "--client", "claude")
    assert _ivoai("validate", "--client", "claude")["ok"] is True
    work = tmp_path / "work"
    work.mkdir()
    with model_stub() as url:
        done = subprocess.run(
            [str(tool_path("claude")), "-p", "remember the quokka plan"],
            cwd=work,
            env=dict(os.environ, ANTHROPIC_BASE_URL=url, ANTHROPIC_AUTH_TOKEN="stub-only"),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    flush_now(xdg)
    wanted = {"session_start", "user_prompt", "stop", "session_end"}
    wait_until(lambda: wanted <= {e["event"] for e in stored_events(gateway)}, what="claude's hook events")
    events = stored_events(gateway)
    assert {e["agent"] for e in events} == {"claude"}
    assert [e["prompt"] for e in events if e["event"] == "user_prompt"] == ["remember the quokka plan"]
    assert len({e["session_id"] for e in events}) == 1
    row = install.status("claude", probe=False)
    assert row["installed"] and row["last_event_sent_at"] is not None and row["last_error"] is None
