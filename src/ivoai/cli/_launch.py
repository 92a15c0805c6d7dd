"""Fast path for `ivoai codex|claude|opencode` (filled in by the agent launcher).

This module must stay import-light: no typer, rich, pydantic or tomlkit.
"""

from __future__ import annotations

import sys


def launch_main(args: list[str]) -> int:
    """Entry point for launch commands; replaced by the launcher implementation."""
    try:
        from ivoai.client.agents.launch_cli import run_launch_cli
    except ImportError:
        sys.stderr.write(f"ivoai: error: `{args[0]}` launching is not available in this build\n")
        return 1
    return run_launch_cli(args)
