"""`ivoai server logs [--since T] [--follow]`: the gateway's log through the redactor."""

from __future__ import annotations

import sys

import typer

from ivoai.cli.server import data_dir_from


def logs_command(
    ctx: typer.Context,
    since: str | None = typer.Option(
        None, "--since", help="Only newer lines: 90s, 10m, 2h, 1d or an ISO time."
    ),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines until Ctrl-C."),
) -> None:
    """Show the gateway's log, redacted: journald for installed units, else DATA/run/gateway.log."""
    from ivoai.server.datadir import ServerDataDir
    from ivoai.server.logs import file_lines, journal_lines, parse_since, use_journal

    start = parse_since(since)
    lines = (
        journal_lines(start, follow)
        if use_journal()
        else file_lines(ServerDataDir(data_dir_from(ctx)), start, follow)
    )
    for line in lines:
        sys.stdout.write(line + "\n")
        if follow:
            sys.stdout.flush()
