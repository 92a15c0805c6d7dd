"""Run a snippet in a fresh, bare interpreter: for tests of what importing a module loads."""

from __future__ import annotations

import os
import subprocess
import sys


def run_bare(code: str) -> str:
    """stdout of `python -c code`, without the coverage measurement scripts/test starts in every Python
    subprocess (its .pth hook imports modules, such as `re` and `typing`, that the product does not)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    argv = [sys.executable, "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60, env=env).stdout
