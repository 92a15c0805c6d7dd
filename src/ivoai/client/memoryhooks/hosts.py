"""What Codex and Claude Code offer for hooks, ivoai's hook definitions, and the managed wrapper.

Verified against the installed hosts (codex-cli 0.171.0, Claude Code 2.1.197):

- Both read hooks as `{"hooks": {EVENT: [{"matcher"?, "hooks": [{"type": "command", "command",
  "timeout"}]}]}}` and run each command through the shell with the event's JSON on stdin. Exit 0 with
  empty stdout means "allow / continue".
- Codex: per-process `-c hooks.EVENT=[…]` overrides are a real hook source ("session flags", key
  `/<session-flags>/config.toml:<event>:<group>:<handler>`), listed by `codex app-server`'s
  `hooks/list`; user files are `$CODEX_HOME/hooks.json` or `[hooks]` in `config.toml`. A non-managed
  hook runs only once the user trusted it (`/hooks` in the TUI); trust is stored as
  `[hooks.state."<key>"] trusted_hash = "sha256:…"` in the user's `config.toml`, the hash covering the
  normalized definition (event, matcher, command, timeout). A stable definition therefore keeps its
  trust; ivoai never writes trust itself and never passes `--dangerously-bypass-hook-trust`. Codex
  clamps SessionEnd hook timeouts to 3 s (with a warning), so SessionEnd definitions say 3.
- Claude Code: `--settings FILE` adds a per-session settings source; user settings are
  `$CLAUDE_CONFIG_DIR/settings.json` (default `~/.claude/settings.json`). Claude has no hook trust
  review; it has no command that lists hooks either.

Events ivoai hooks: SessionStart, UserPromptSubmit, PostToolUse, Stop, PreCompact, SessionEnd (the
same names on both hosts; Codex's PostCompact and Claude's Notification carry nothing memory needs).
"""

from __future__ import annotations

import json
import os
import sys

from ivoai.client.memoryhooks.locations import wrapper_path
from ivoai.common.limits import (
    MEMORY_HOOK_HOST_TIMEOUT_SECONDS,
    MEMORY_HOOK_SESSION_END_HOST_TIMEOUT_SECONDS,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

CLIENTS = ("codex", "claude")
EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "PreCompact", "SessionEnd")
# hooks/list reports events in camelCase.
CODEX_LIST_NAMES = {
    "sessionStart": "SessionStart",
    "userPromptSubmit": "UserPromptSubmit",
    "postToolUse": "PostToolUse",
    "stop": "Stop",
    "preCompact": "PreCompact",
    "sessionEnd": "SessionEnd",
}
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./-+=:@%")


def sh_quote(word: str) -> str:
    """`word` for a POSIX shell command line (single-quoted unless it is plainly safe)."""
    if word and all(c in _SAFE for c in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def hook_command(event: str, client: str, env: Mapping[str, str] | None = None) -> str:
    """The stable command line of one hook definition: the managed wrapper, the event, the client."""
    return f"{sh_quote(wrapper_path(env))} {event} --client {client}"


def host_timeout(event: str) -> int:
    """Seconds the host may let the hook run (the host's backstop; the runner's own budget is shorter)."""
    if event == "SessionEnd":
        return MEMORY_HOOK_SESSION_END_HOST_TIMEOUT_SECONDS
    return MEMORY_HOOK_HOST_TIMEOUT_SECONDS


def handler(event: str, client: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"type": "command", "command": hook_command(event, client, env), "timeout": host_timeout(event)}


def group(event: str, client: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The matcher group ivoai adds for `event` (no matcher: every tool for PostToolUse)."""
    return {"hooks": [handler(event, client, env)]}


def claude_settings(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The per-session `--settings` document with ivoai's Claude hooks."""
    return {"hooks": {event: [group(event, "claude", env)] for event in EVENTS}}


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string (what `-c` parses)


def codex_config_args(env: Mapping[str, str] | None = None) -> list[str]:
    """Process-local `-c hooks.EVENT=[…]` overrides with ivoai's Codex hooks."""
    args: list[str] = []
    for event in EVENTS:
        command = _toml_string(hook_command(event, "codex", env))
        args += [
            "-c",
            f'hooks.{event}=[{{hooks=[{{type="command",command={command},timeout={host_timeout(event)}}}]}}]',
        ]
    return args


# ---- the managed wrapper ----


def ivoai_argv() -> list[str]:
    """How to run this ivoai: its console script next to the interpreter, on PATH, or `python -m ivoai`."""
    from ivoai.client.agents.executors import which

    beside = os.path.join(os.path.dirname(sys.executable), "ivoai")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return [beside]
    found = which("ivoai")
    if found:
        return [found]
    return [sys.executable, "-m", "ivoai"]


def wrapper_text(argv: list[str]) -> str:
    """The wrapper script: fail-safe (exit 0 when ivoai is gone), then `ivoai memory hook "$@"`."""
    program = argv[0]
    return (
        "#!/bin/sh\n"
        "# ivoai memory hook runner: written by ivoai, rewritten by `ivoai memory hooks repair`.\n"
        "# Codex and Claude Code hook definitions run this file; if ivoai is gone it answers 0.\n"
        f"[ -x {sh_quote(program)} ] || exit 0\n"
        f'exec {" ".join(sh_quote(a) for a in argv)} memory hook "$@"\n'
    )


def read_wrapper(env: Mapping[str, str] | None = None) -> str | None:
    try:
        fd = os.open(wrapper_path(env), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 65536).decode("utf-8", "replace")
    finally:
        os.close(fd)


def ensure_wrapper(env: Mapping[str, str] | None = None) -> bool:
    """Write the wrapper (0700, atomically) unless it already has the right content; True if written.

    Raises:
        UnsafePathError: the managed bin directory is a symlink, foreign-owned or not 0700.
        OSError: it could not be written.
    """
    from ivoai.common.lightio import open_private_dirs, write_atomic, xdg_root

    text = wrapper_text(ivoai_argv())
    path = wrapper_path(env)
    if read_wrapper(env) == text and os.access(path, os.X_OK):
        return False
    dir_fd = open_private_dirs(xdg_root("XDG_DATA_HOME", ".local/share", env), "bin")
    try:
        write_atomic(dir_fd, os.path.basename(path), text.encode(), mode=0o700)
    finally:
        os.close(dir_fd)
    return True


# ---- host configuration files ----


def codex_home(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    value = env.get("CODEX_HOME", "")
    return value if value and os.path.isabs(value) else os.path.join(os.path.expanduser("~"), ".codex")


def claude_home(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    value = env.get("CLAUDE_CONFIG_DIR", "")
    return value if value and os.path.isabs(value) else os.path.join(os.path.expanduser("~"), ".claude")


def config_file(client: str, env: Mapping[str, str] | None = None) -> str:
    """The host file the managed installation edits: `hooks.json` (Codex), `settings.json` (Claude)."""
    if client == "codex":
        return os.path.join(codex_home(env), "hooks.json")
    return os.path.join(claude_home(env), "settings.json")


# ---- asking the real Codex what it loaded ----


def codex_hook_list(
    codex: str, env: Mapping[str, str], *, extra_args: list[str] | None = None, cwd: str | None = None
) -> list[dict[str, Any]]:
    """The hooks the real `codex app-server` lists (`hooks/list`) for `cwd`, with trust status.

    Raises:
        OSError: codex could not be started. RuntimeError: it did not answer in time or answered an error.
    """
    import subprocess

    from ivoai.client.agents.childenv import probe_env

    cwd = cwd or os.getcwd()
    with subprocess.Popen(
        [codex, *(extra_args or []), "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=probe_env(env),
        cwd=cwd,
    ) as proc:
        try:
            return _list_hooks(proc, cwd)
        finally:
            proc.kill()


def _list_hooks(proc: Any, cwd: str) -> list[dict[str, Any]]:
    """JSON-RPC over the app-server's stdio: initialize, initialized, hooks/list; answers read by id."""
    import selectors
    import time

    from ivoai.common.limits import MEMORY_HOOK_VALIDATE_TIMEOUT_SECONDS

    deadline = time.monotonic() + MEMORY_HOOK_VALIDATE_TIMEOUT_SECONDS
    hello = {"clientInfo": {"name": "ivoai", "version": "1"}, "capabilities": {}}
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [cwd]}},
    ):
        proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    buffer = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                if isinstance(doc, dict) and doc.get("id") == 2:
                    if "error" in doc:
                        raise RuntimeError(f"codex hooks/list failed: {doc['error']}")
                    data = doc.get("result", {}).get("data", [])
                    return [h for entry in data for h in entry.get("hooks", [])]
    raise RuntimeError(
        f"codex app-server did not list hooks within {MEMORY_HOOK_VALIDATE_TIMEOUT_SECONDS:g}s"
    )
