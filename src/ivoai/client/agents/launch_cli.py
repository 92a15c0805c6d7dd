"""`ivoai codex|claude|opencode …`: parse by hand, launch, map errors to one line and an exit code.

Reached from `ivoai.cli._launch` before Typer is imported; keep the import chain light (a test in
tests/test_layering.py pins that typer, rich, pydantic, tomlkit and httpx stay unloaded).
"""

from __future__ import annotations

import os
import sys

from ivoai.client.agents.argv import USAGE, LaunchArgs, parse_launch_args
from ivoai.common.errors import IvoaiError

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` stays unloaded on the launch path
    from collections.abc import Callable
    from typing import Protocol, TypeVar

    class _Parsed(Protocol):
        @property
        def help(self) -> bool: ...

    _P = TypeVar("_P", bound=_Parsed)


def _error(message: str, code: int) -> int:
    from ivoai.common.redact import redact

    sys.stderr.write(f"ivoai: error: {redact(message)}\n")
    return code


def run_launch_cli(args: list[str]) -> int:
    """Run `ivoai EXECUTOR [options] [-- ARGS]`; return the exit status (the client's, once it ran)."""

    def launch(parsed: LaunchArgs) -> int:
        from ivoai.client.agents.launch import run_launch

        return run_launch(parsed)

    return run_parsed(args, parse_launch_args, USAGE, launch)


def run_parsed(
    args: list[str], parse: Callable[[list[str]], _P], usage: str, run: Callable[[_P], int]
) -> int:
    """Parse `args` and run them (`usage` for `--help`); an error is one line and an exit code.

    Exit codes: the error's own (2 usage, 1 failure), 130 interrupted; a traceback only with IVOAI_DEBUG=1.
    """
    try:
        parsed = parse(args)
        if parsed.help:
            sys.stdout.write(usage)
            return 0
        return run(parsed)
    except IvoaiError as exc:
        return _error(exc.message, exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("ivoai: interrupted before the client started\n")
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:
        if os.environ.get("IVOAI_DEBUG") == "1":
            raise
        return _error(f"internal error: {type(exc).__name__}: {exc} (rerun with IVOAI_DEBUG=1)", 1)
