"""`ivoai server [--data-dir DIR] ...`: every server command; sub-commands are loaded lazily.

Each subsystem owns its own module; this table is the only shared edit point.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ivoai.cli._lazy import Registry, lazy_group

COMMANDS: Registry = {
    # server lifecycle (gateway)
    "init": ("ivoai.cli.server.lifecycle:init_command", "Create the server data directory and config."),
    "start": ("ivoai.cli.server.lifecycle:start_command", "Run the server in the foreground."),
    "status": ("ivoai.cli.server.lifecycle:status_command", "Show the server's state."),
    "enrollment": ("ivoai.cli.server.enrollment:app", "One-time enrollment codes for clients."),
    "clients": ("ivoai.cli.server.enrollment:clients_app", "Enrolled clients: list, revoke."),
    "web-access": ("ivoai.cli.server.webaccess:app", "Activation codes for the Web MCP consent page."),
    "skill": ("ivoai.cli.server.skill:app", "The ivoai-memory-context skill."),
    # context service
    "connector": ("ivoai.cli.server.connector:app", "Context connectors: add, list, remove."),
    "ingest": ("ivoai.cli.server.connector:ingest_command", "Ingest connectors into the context index."),
    "context": ("ivoai.cli.server.context:app", "Search, status and rebuild of the context index."),
    # memory service
    "memory": ("ivoai.cli.server.memory:app", "Durable memory pages: query, read, write, export."),
    # operations (issue 19): backup and restore, deployment rendering, logs
    "backup": ("ivoai.cli.server.backup:app", "Back up the data directory; list and verify archives."),
    "restore": ("ivoai.cli.server.backup:restore_command", "Restore a backup archive (local path only)."),
    "setup": ("ivoai.cli.server.setup:setup_command", "Render or install systemd units and Compose files."),
    "logs": ("ivoai.cli.server.logs:logs_command", "Show the gateway's logs (redacted)."),
}

app = typer.Typer(
    cls=lazy_group(COMMANDS),
    no_args_is_help=True,
    add_completion=False,
    help="Run and administer an ivoai server.",
)


@app.callback()
def _server(
    ctx: typer.Context,
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        help="Server data directory (default $XDG_DATA_HOME/ivoai/server).",
        envvar="IVOAI_SERVER_DATA_DIR",
    ),
) -> None:
    ctx.obj = data_dir


def data_dir_from(ctx: typer.Context, *, initialize: bool = True) -> Path:
    """The `--data-dir` given to `ivoai server`, or the default; sub-commands call this.

    `init` is implicit: a data directory without `config.toml` is initialized here with the defaults
    (`ivoai server init` without options) and the command says so on stderr, so that every command
    finds, and `server status` reports, the same initialized directory. `init` and `status` pass
    `initialize=False` (status never creates anything).
    """
    found = ctx.find_object(Path)
    if isinstance(found, Path):
        root = found
    else:
        from ivoai.cli._context import client_context

        root = client_context().paths.server_data_dir
    if initialize and not (root / "config.toml").exists():
        from ivoai.cli._output import info
        from ivoai.server.runtime.lifecycle import init_server

        result = init_server(root)
        info(
            f"initialized server data directory {result['data_dir']} with defaults (listen "
            f"{result['listen']}, embedded mode); `{server_command(root, 'init --help')}` shows the options"
        )
    return root


def server_command(root: Path, command: str) -> str:
    """`ivoai server [--data-dir ROOT] COMMAND` as it works when pasted into a fresh shell.

    The program is `ivoai.common.command.ivoai_command()` (bare `ivoai` only when PATH finds this
    installation); `--data-dir` is given only when ROOT is not the default.
    """
    import shlex

    from ivoai.cli._context import client_context
    from ivoai.common.command import ivoai_command

    default = root.absolute() == client_context().paths.server_data_dir.absolute()
    where = "" if default else f"--data-dir {shlex.quote(str(root.absolute()))} "
    return f"{ivoai_command()} server {where}{command}"
