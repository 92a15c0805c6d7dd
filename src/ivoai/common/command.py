"""The command that runs *this* ivoai from a fresh shell, for every command line ivoai prints.

After `bash scripts/quickstart` the `ivoai` entry point lives in the clone's `.venv/bin`, which is
not on PATH; the script links it into `~/.local/bin` (as pipx does), which a fresh shell has on
PATH on most distributions, but not always (and never in a shell started before the directory
existed). So printed commands use the bare `ivoai` only when the `ivoai` found on PATH right now is
this installation; otherwise they use the absolute path of this installation's entry point, which
works when pasted anywhere.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys

PROGRAM = "ivoai"


def entry_point() -> str | None:
    """This installation's `ivoai` console script (in the interpreter's environment), if there is one."""
    for candidate in (
        os.path.join(sys.prefix, "bin", PROGRAM),
        os.path.join(os.path.dirname(sys.executable), PROGRAM),
    ):
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    return None


def ivoai_command(path: str | None = None) -> str:
    """`ivoai` when PATH (default: `$PATH`) finds this installation, else a shell-quoted absolute command."""
    mine = entry_point()
    found = shutil.which(PROGRAM, path=path if path is not None else os.environ.get("PATH", os.defpath))
    if mine is not None and found is not None and os.path.realpath(found) == os.path.realpath(mine):
        return PROGRAM
    if mine is not None:
        return shlex.quote(mine)
    return shlex.join([sys.executable, "-m", PROGRAM])
