"""`ivoai codex|claude|opencode …`: parse by hand, launch, map errors to one line and an exit code.

Reached from `ivoai.cli._launch` before Typer is imported; keep the import chain light (a test in
tests/test_layering.py pins that typer, rich, pydantic, tomlkit and httpx stay unloaded).
"""

from __future__ import annotations

import os
import sys

from ivoai.client.agents.argv import USAGE, parse_launch_args
from ivoai.common.errors import IvoaiError


def _error(message: str, code: int) -> int:
    from ivoai.common.redact import redact

    sys.stderr.write(f"ivoai: error: {redact(message)}\n")
    return code


def run_launch_cli(args: list[str]) -> int:
    """Run `ivoai EXECUTOR [options] [-- ARGS]`; return the exit status (the client's, once it ran)."""
    try:
        parsed = parse_launch_args(args)
        if parsed.help:
            sys.stdout.write(USAGE)
            return 0
        from ivoai.client.agents.launch import run_launch

        return run_launch(parsed)
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
