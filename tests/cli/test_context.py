"""One client context per CLI invocation: shared by everything the command calls, fresh for the next."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ivoai.cli._context import client_context
from ivoai.client.context import ClientContext
from ivoai.common.paths import XdgPaths
from tests.conftest import CliRunner as IvoaiRunner


def _probe_app(seen: list[ClientContext]) -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        seen.append(client_context())

    @app.command()
    def probe() -> None:
        seen.append(client_context())
        seen.append(client_context())

    return app


def test_one_context_is_shared_within_an_invocation_and_rebuilt_for_the_next(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[ClientContext] = []
    app = _probe_app(seen)
    assert CliRunner().invoke(app, ["probe"]).exit_code == 0
    assert len(seen) == 3 and seen[0] is seen[1] is seen[2]
    assert seen[0].paths == xdg
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state2"))
    assert CliRunner().invoke(app, ["probe"]).exit_code == 0
    assert seen[3] is not seen[0]
    assert seen[3].paths.state == tmp_path / "state2" / "ivoai"


def test_outside_an_invocation_a_fresh_context_follows_the_environment(xdg: XdgPaths) -> None:
    assert client_context().paths == xdg


def test_commands_use_the_invocations_roots(xdg: XdgPaths, cli: IvoaiRunner) -> None:
    result = cli("session", "list", "--json")
    assert result.code == 0
    assert xdg.sessions_dir.is_dir()  # listing creates the private sessions directory below this state root


def test_uninstall_and_monitor_take_their_roots_from_the_invocations_context(
    xdg: XdgPaths, tmp_path: Path, cli: IvoaiRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = XdgPaths(*(tmp_path / "ctx" / name / "ivoai" for name in ("config", "data", "state", "cache")))
    other.data.mkdir(parents=True)
    monkeypatch.setattr("ivoai.cli._context.client_context", lambda: ClientContext(paths=other))
    result = cli("uninstall", "--dry-run", "--json")
    assert result.code == 0
    roots = [i["path"] for i in json.loads(result.out)["items"] if i["kind"] == "root"]
    assert roots == [str(other.data)]  # the environment's data root (xdg) has no files: not listed
    assert cli("monitor", "--json").code == 0
    assert other.sessions_dir.is_dir() and not xdg.sessions_dir.exists()
