"""Official logins are delegated to the real `codex` and `claude`; ivoai never reads their credentials."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ivoai.client.connections.registry import ConnectionRegistry
from ivoai.common.paths import XdgPaths
from tests.conftest import CliRunner, tool_path

_OPENED: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _OPENED is not None and event == "open" and args and isinstance(args[0], str | bytes | os.PathLike):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


@pytest.fixture
def official_home(xdg: XdgPaths, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """PATH with only the real clients (and node); planted vendor credential files; opens recorded."""
    global _OPENED
    home = Path(os.environ["HOME"])
    (home / ".codex").mkdir()
    (home / ".codex" / "auth.json").write_text(
        '{"tokens": {"access_token": "sk-planted-never-read-0000000000"}}'
    )
    (home / ".claude").mkdir()
    (home / ".claude" / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "planted"}}')
    bin_dir = tool_path("codex").parent
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("CODEX_HOME", raising=False)
    _OPENED = []
    try:
        yield home
    finally:
        _OPENED = None


def _vendor_files_opened(home: Path) -> list[str]:
    assert _OPENED is not None
    return [p for p in _OPENED if p.startswith((str(home / ".codex"), str(home / ".claude")))]


@pytest.mark.parametrize("provider", ["chatgpt", "claude"])
def test_connect_without_an_account_reports_not_logged_in_and_reads_no_vendor_file(
    provider: str, official_home: Path, cli: CliRunner, xdg: XdgPaths
) -> None:
    result = cli("connect", provider)
    assert result.code == 1
    assert "not logged in" in result.err
    assert "Traceback" not in result.err and "planted" not in result.err + result.out
    # No terminal here: ivoai never starts a browser login it cannot complete.
    assert "needs a terminal" in result.err
    assert _vendor_files_opened(official_home) == []
    assert ConnectionRegistry(xdg).load().official == {}


@pytest.mark.parametrize("provider", ["chatgpt", "claude"])
def test_connect_check_only_reports_status_without_login(
    provider: str, official_home: Path, cli: CliRunner
) -> None:
    result = cli("connect", provider, "--check")
    assert result.code == 1
    assert f"{provider}: not logged in" in result.err
    assert _vendor_files_opened(official_home) == []


def test_missing_official_client_is_a_clear_error(
    xdg: XdgPaths, monkeypatch: pytest.MonkeyPatch, cli: CliRunner, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    result = cli("connect", "chatgpt")
    assert result.code == 1
    assert "`codex` was not found on PATH" in result.err


@pytest.mark.parametrize("provider", ["chatgpt", "claude"])
def test_disconnect_forgets_ivoai_note_but_never_logs_the_official_client_out(
    provider: str, official_home: Path, cli: CliRunner, xdg: XdgPaths
) -> None:
    from ivoai.client.connections.manage import record_official

    record_official(xdg, provider, "logged in")  # type: ignore[arg-type]
    before = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in official_home.rglob("*") if p.is_file()}
    result = cli("disconnect", provider)
    assert result.code == 0
    assert "official login is untouched" in result.err
    assert ConnectionRegistry(xdg).load().official == {}
    assert {
        p: (p.stat().st_size, p.stat().st_mtime_ns) for p in official_home.rglob("*") if p.is_file()
    } == before
    assert _vendor_files_opened(official_home) == []


def test_probe_environment_is_minimal_and_drops_payg_keys() -> None:
    from ivoai.client.connections.official import interactive_env, probe_env

    env = {
        "HOME": "/h",
        "PATH": "/bin",
        "OPENAI_API_KEY": "sk-x",
        "ANTHROPIC_API_KEY": "k",
        "AWS_SECRET": "s",
    }
    assert probe_env(env) == {"HOME": "/h", "PATH": "/bin"}
    assert "OPENAI_API_KEY" not in interactive_env(env) and "ANTHROPIC_API_KEY" not in interactive_env(env)


def test_login_environment_drops_the_same_payg_variables_as_a_launched_session() -> None:
    from ivoai.client.agents.childenv import PAYG_ENV_VARS, client_env
    from ivoai.client.connections.official import interactive_env

    env = {"HOME": "/h", "PATH": "/bin", "LANG": "C.UTF-8", "IVOAI_MCP_TOKEN_MEMORY": "t"}
    env.update({name: "secret" for name in PAYG_ENV_VARS})
    login = interactive_env(env)
    assert login == {"HOME": "/h", "PATH": "/bin", "LANG": "C.UTF-8"}
    assert login == client_env(env)[0]
    assert "CLAUDE_CODE_OAUTH_TOKEN" not in login and "GEMINI_API_KEY" not in login
