"""The help of every command: boolean flags read as flags (`--json`, not `--json <bool>`)."""

from __future__ import annotations

import typer.main
from typer import _click as click
from typer.core import TyperGroup

from ivoai.cli._app import app
from tests.conftest import CliRunner


def _command_paths() -> list[tuple[str, ...]]:
    """Every command and group below `ivoai`, loading the lazy ones."""
    root = typer.main.get_command(app)
    paths: list[tuple[str, ...]] = [()]
    todo: list[tuple[tuple[str, ...], click.Command]] = [((), root)]
    while todo:
        path, command = todo.pop()
        if not isinstance(command, TyperGroup):
            continue
        ctx = click.Context(command, info_name=path[-1] if path else "ivoai")
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, (path, name)
            paths.append((*path, name))
            todo.append(((*path, name), sub))
    return paths


def test_every_commands_help_shows_flags_without_a_value_placeholder(cli: CliRunner) -> None:
    paths = _command_paths()
    assert ("server", "memory", "write") in paths and ("knowledge", "search") in paths
    for path in paths:
        result = cli(*path, "--help")
        assert result.code == 0, (path, result.err)
        assert "<bool>" not in result.out, (path, result.out)
    write = cli("server", "memory", "write", "--help").out
    assert "--pinned" in write and "--not-pinned" in write
    assert "<int>" in cli("knowledge", "search", "--help").out.replace("<int range>", "<int>")
