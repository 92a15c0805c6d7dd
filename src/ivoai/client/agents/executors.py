"""The official clients ivoai launches and where it finds them (import-light: `os` only).

Discovery order: ivoai's managed data root first (`$XDG_DATA_HOME/ivoai/bin/NAME`, where an
explicit `ivoai` setup installs pinned, reviewed versions), then `PATH`. A pre-existing install
on PATH stays the user's own; ivoai never modifies it.
"""

from __future__ import annotations

import os

from ivoai.common.lightio import xdg_root

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


class ExecutorSpec:
    """What ivoai knows about one official client; facts only, no behaviour."""

    __slots__ = ("auth_args", "binary", "compression", "display", "mcp_style", "name", "version_args")

    def __init__(
        self,
        name: str,
        display: str,
        binary: str,
        version_args: tuple[str, ...],
        auth_args: tuple[str, ...] | None,
        mcp_style: str | None,
        compression: tuple[str, ...],
    ) -> None:
        self.name = name
        self.display = display
        self.binary = binary
        self.version_args = version_args
        self.auth_args = auth_args
        self.mcp_style = mcp_style  # "codex-flags", "claude-file" or None (no process-local MCP)
        self.compression = compression  # providers this executor can run behind


EXECUTORS: dict[str, ExecutorSpec] = {
    "codex": ExecutorSpec(
        "codex",
        "OpenAI Codex CLI",
        "codex",
        ("--version",),
        ("login", "status"),
        "codex-flags",
        ("caveman", "headroom"),
    ),
    "claude": ExecutorSpec(
        "claude",
        "Claude Code",
        "claude",
        ("--version",),
        ("auth", "status"),
        "claude-file",
        ("caveman", "headroom"),
    ),
    # Direct-only (seed 003): the pinned Caveman OpenCode profile needs PAYG provider keys, which
    # ivoai never accepts, so OpenCode always runs the official client unchanged.
    "opencode": ExecutorSpec("opencode", "OpenCode", "opencode", ("--version",), None, None, ()),
}


def managed_bin_dir(env: Mapping[str, str] | None = None) -> str:
    """Where an explicit ivoai setup installs pinned launchers."""
    return os.path.join(xdg_root("XDG_DATA_HOME", ".local/share", env), "bin")


def _is_executable_file(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def which(binary: str, env: Mapping[str, str] | None = None) -> str | None:
    """The first executable `binary` on PATH (absolute path), or None."""
    env = os.environ if env is None else env
    for entry in env.get("PATH", os.defpath).split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue  # a relative PATH entry would make the result depend on the current directory
        candidate = os.path.join(entry, binary)
        if _is_executable_file(candidate):
            return candidate
    return None


def discover(binary: str, env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(path, "managed"|"path") for an installed client, or None when it is not installed."""
    managed = os.path.join(managed_bin_dir(env), binary)
    if _is_executable_file(managed):
        return managed, "managed"
    found = which(binary, env)
    return (found, "path") if found else None
