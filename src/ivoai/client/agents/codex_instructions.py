"""The research-order instruction for Codex, merged with the user's own `developer_instructions`.

Codex has one `developer_instructions` string; a `-c developer_instructions=…` override replaces
whatever the user configured (shown with the real Codex: `codex debug prompt-input` renders the
model-visible prompt, and after such an override the user's text is gone). Codex offers no additive
setting for it (its `additionalDeveloperInstructions` is an enterprise requirement, not a config
key; MCP server `instructions` are not put in the prompt), so ivoai reads the value Codex would use
and passes it back *followed by* ivoai's instruction.

The value is resolved the way Codex 0.171 resolves it (observed with `debug prompt-input`), highest
precedence first:

1. `.codex/config.toml` in the project (from the git root down to the working directory; the
   deepest wins), used by Codex only when the user's config marks the project
   `[projects."<path>"] trust_level = "trusted"`;
2. the active profile, `-p NAME` / `--profile NAME` among the client arguments:
   `$CODEX_HOME/NAME.config.toml`;
3. `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`);
4. `/etc/codex/config.toml`.

A `-c developer_instructions=…` the user passes after `--` comes after ivoai's and wins, as they
asked. Every file is only read (bounded, never written); one that is missing, unreadable or not
valid TOML contributes nothing (Codex reports a broken config itself). Import-light: `os` and the
stdlib `tomllib`, on the launch path.
"""

from __future__ import annotations

import os
import tomllib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

CODEX_CONFIG_MAX_BYTES = 1 << 20  # a Codex config.toml is a few KiB; read at most 1 MiB of one
SYSTEM_CONFIG = "/etc/codex/config.toml"
KEY = "developer_instructions"


def codex_home(env: Mapping[str, str]) -> str:
    """`$CODEX_HOME` when absolute, else `~/.codex` (as Codex itself resolves it)."""
    value = env.get("CODEX_HOME", "")
    if value and os.path.isabs(value):
        return value
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".codex")


def _read(path: str) -> dict[str, object]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        raw = os.read(fd, CODEX_CONFIG_MAX_BYTES + 1)
    except OSError:
        return {}
    finally:
        os.close(fd)
    if len(raw) > CODEX_CONFIG_MAX_BYTES:
        return {}
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def active_profile(client_args: Sequence[str]) -> str | None:
    """The `-p/--profile NAME` among the client's arguments (before a `--`), if it is a plain name."""
    name: str | None = None
    args = list(client_args)
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg in ("-p", "--profile") and i + 1 < len(args):
            name = args[i + 1]
        elif arg.startswith("--profile="):
            name = arg.partition("=")[2]
    if name and all(c.isalnum() or c in "-_." for c in name) and not name.startswith("."):
        return name
    return None


def _git_root(start: str) -> str | None:
    current = start
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _trusted(user: Mapping[str, object], *paths: str) -> bool:
    projects = user.get("projects")
    if not isinstance(projects, dict):
        return False
    for path in paths:
        for key in {path, os.path.realpath(path)}:
            entry = projects.get(key)
            if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
                return True
    return False


def _project_layers(cwd: str, user: Mapping[str, object]) -> list[str]:
    root = _git_root(cwd)
    if root is None or not _trusted(user, root, cwd):
        return []
    dirs = [cwd]
    while dirs[-1] != root and os.path.dirname(dirs[-1]) != dirs[-1]:
        dirs.append(os.path.dirname(dirs[-1]))
    return [os.path.join(d, ".codex", "config.toml") for d in reversed(dirs)]


def user_instructions(env: Mapping[str, str], client_args: Sequence[str], cwd: str) -> str | None:
    """The `developer_instructions` Codex would use without ivoai's override, or None."""
    home = codex_home(env)
    user = _read(os.path.join(home, "config.toml"))
    layers: list[dict[str, object]] = [_read(SYSTEM_CONFIG), user]
    profile = active_profile(client_args)
    if profile is not None:
        layers.append(_read(os.path.join(home, f"{profile}.config.toml")))
    layers.extend(_read(path) for path in _project_layers(cwd, user))
    value: str | None = None
    for layer in layers:
        found = layer.get(KEY)
        if isinstance(found, str):
            value = found
    return value if value and value.strip() else None


def merged_instructions(
    ivoai_text: str, env: Mapping[str, str], client_args: Sequence[str], cwd: str | None = None
) -> str:
    """The user's own developer instructions (if any), then ivoai's."""
    if cwd is None:
        try:
            cwd = os.getcwd()
        except OSError:  # the working directory was removed: no project layer can apply
            cwd = "/"
    own = user_instructions(env, client_args, cwd)
    return ivoai_text if own is None else f"{own.rstrip()}\n\n{ivoai_text}"
