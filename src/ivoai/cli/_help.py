"""Help rendering: boolean flags are shown as flags, without a value placeholder.

Typer 0.29 renders help as rich panels when `rich` is installed (it is a dependency), and those
panels print every option's type, so a flag reads `--json <bool>` as if it took a value (plain,
click-style help already leaves the type out for flags). `install()` makes the panels agree: an
option that is a flag (`--json`, `--pinned/--not-pinned`, `--help`) shows no type. Called once when
the Typer app is built; `tests/cli/test_help.py` renders the help of every command and pins it.
"""

from __future__ import annotations

from typing import Any

from typer import _click as click
from typer.core import TyperOption

_MARK = "_ivoai_flags_without_type"


def install() -> None:
    """Make TyperOption's rich help show no type for flags (idempotent)."""
    if getattr(TyperOption, _MARK, False):
        return
    original = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: click.Context) -> Any:
        if self.is_flag and not self.count:
            return None
        return original(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
    setattr(TyperOption, _MARK, True)
