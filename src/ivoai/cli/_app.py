"""The Typer application: global options, error handling, and the lazily loaded command table."""

from __future__ import annotations

import os
import sys

import typer
from typer import _click as click  # typer vendors click; see _lazy
from typer._click.exceptions import UsageError as ClickUsageError

from ivoai import __version__
from ivoai.cli import _help
from ivoai.cli._lazy import Registry, lazy_group
from ivoai.common.errors import IvoaiError
from ivoai.common.redact import redact

COMMANDS: Registry = {
    "status": ("ivoai.cli.status:status_command", "Show ivoai's state: identity, paths, connections."),
    "doctor": ("ivoai.cli.status:doctor_command", "Check permissions, versions and components."),
    "config": ("ivoai.cli.config:app", "Show and change config.toml."),
    "project": ("ivoai.cli.project:app", "Project identity (.ivoai.toml)."),
    "artifacts": ("ivoai.cli.artifacts:app", "The private WorkingContext artifact store."),
    "server": ("ivoai.cli.server:app", "Run and administer an ivoai server."),
    "quickstart": ("ivoai.cli.quickstart:quickstart_command", "Index a checkout and search it over MCP."),
    "connect": ("ivoai.cli.connect:app", "Connect official logins, ivoai servers and MCP servers."),
    "disconnect": ("ivoai.cli.connect:disconnect_command", "Remove ivoai's own connection state."),
    "knowledge": ("ivoai.cli.knowledge:app", "Search enrolled knowledge sources through a router."),
    "session": ("ivoai.cli.session:app", "Launched sessions: list, show, stop."),
    "monitor": ("ivoai.cli.session:monitor_command", "Live sessions and compression results."),
    "memory": ("ivoai.cli.memory:app", "Memory hooks for Codex and Claude Code (install, status, flush)."),
    # issue 20: skill control plane
    "skills": ("ivoai.cli.skills:app", "Skills: registry, policy, non-executing staging, attachment."),
    # components (issue 17)
    "setup": ("ivoai.cli.setup:setup_command", "Install or repair the pinned components."),
    "update": ("ivoai.cli.update:update_command", "Update components and state; --rollback undoes it."),
    "uninstall": ("ivoai.cli.uninstall:uninstall_command", "Remove ivoai's files, keep yours."),
    # AUTO (issue 15)
    "auto": ("ivoai.cli.auto:app", "Quota-aware orchestrated session; `auto plan --check` scores a plan."),
    "quota": ("ivoai.cli.quota:quota_command", "Subscription quota per vendor and window, with pace."),
}

_help.install()  # boolean flags render as flags in help, not `--json <bool>`

app = typer.Typer(
    cls=lazy_group(COMMANDS),
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="ivoai: official coding agents with memory, context and evidence.\n\n"
    "Launch agents with `ivoai codex|claude|opencode [--direct] [--knowledge-source S]... [-- ARGS]`.",
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"ivoai {__version__}\n")
        raise typer.Exit()


# Commands that write server data: everything they (and the libraries they drive, such as Qdrant
# Edge's segment directories) create is private, so they run with umask 077 (restored afterwards).
PRIVATE_UMASK_COMMANDS = frozenset({"server", "quickstart"})


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for unexpected errors."),
) -> None:
    if debug:
        os.environ["IVOAI_DEBUG"] = "1"
    if ctx.invoked_subcommand in PRIVATE_UMASK_COMMANDS:
        from ivoai.common.fsio import private_umask

        previous = private_umask()
        ctx.call_on_close(lambda: os.umask(previous))


def run(args: list[str]) -> int:
    """Run the Typer app; turn errors into one-line messages and exit codes (0 ok, 1 fail, 2 usage)."""
    debug = "--debug" in args or os.environ.get("IVOAI_DEBUG") == "1"
    try:
        result = app(args=args, prog_name="ivoai", standalone_mode=False)
        if isinstance(result, int):
            return result
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        sys.stderr.write("ivoai: aborted\n")
        return 130
    except click.ClickException as exc:
        exc.show()
        return 2 if isinstance(exc, ClickUsageError) else 1
    except IvoaiError as exc:
        sys.stderr.write(f"ivoai: error: {redact(exc.message)}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("ivoai: interrupted\n")
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:
        if debug:
            raise
        sys.stderr.write(
            f"ivoai: internal error: {redact(type(exc).__name__ + ': ' + str(exc))} (rerun with --debug)\n"
        )
        return 1
    return 0
