"""Process-local extras of one agent session: user MCP servers and memory hooks (issue 18).

`session_extras()` is what the launch path calls (`ivoai codex|claude`, and `ivoai auto`, which runs
on the same launcher) after the knowledge router started; nothing global is written:

- **User MCP servers** (`ivoai connect mcp add`): every enabled entry, or those named with `--mcp
  NAME` (`--no-user-mcp`: none). Codex gets `-c mcp_servers.NAME.url=…` and, for a server with a
  token, `-c mcp_servers.NAME.bearer_token_env_var="IVOAI_MCP_TOKEN_<ID>"` with the token only in the
  child's environment; Claude gets a second private `--mcp-config` file (0600 in the session's 0700
  runtime directory, removed with it) holding URL and `Authorization` header. A user entry whose
  name Codex's own config already uses is not attached (merging `-c` keys into the user's server of
  that name would corrupt it); `ivoai-knowledge` is reserved. User servers are not authoritative
  knowledge, so they never change the compression decision (the router's sources alone do).
- **Memory hooks** (`ivoai.client.memoryhooks`): when the session routes a memory source, Codex gets
  `-c hooks.EVENT=[…]` and Claude a private `--settings` file naming ivoai's stable wrapper, plus
  `IVOAI_MEMORY_HOOK_SOURCE` (the destination), `IVOAI_MEMORY_HOOK_ROUTER` and the router's capability
  in `IVOAI_KNOWLEDGE_TOKEN_HOOKS`, so the flusher sends through this session's router. Where the
  managed installation already put ivoai's hooks in the client's own files, no definitions are added
  (they would run twice); the environment still is. Codex runs the hooks once the user trusted them in
  `/hooks` (ivoai never bypasses that review); the definitions never change between sessions, so that
  trust is given once.

Import-light: only `os`; the registry, secrets and JSON are loaded when there is something to attach.
"""

from __future__ import annotations

import os

from ivoai.common.errors import IvoaiError, UsageError
from ivoai.common.lightio import xdg_root

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from ivoai.client.agents.argv import LaunchArgs
    from ivoai.client.agents.executors import ExecutorSpec


class SessionExtras:
    """Client arguments and environment to add, and a Claude settings document (None: nothing)."""

    __slots__ = ("args", "claude_settings", "env", "hooks_destination", "user_mcp")

    def __init__(self) -> None:
        self.args: list[str] = []
        self.env: dict[str, str] = {}
        self.claude_settings: dict[str, Any] | None = None
        self.user_mcp: list[str] = []  # names attached
        self.hooks_destination: str | None = None


def _write_private_json(directory: str, name: str, doc: object) -> str:
    import json

    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return path


def merge_claude_settings(
    base: dict[str, Any] | None, extra: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """Merge two `--settings` documents: hook lists are concatenated, other keys of `extra` win.

    (`ivoai auto` adds its statusLine; Claude takes one `--settings` per session.)
    """
    if not extra:
        return base
    out = dict(base or {})
    for key, value in extra.items():
        if key == "hooks" and isinstance(value, dict) and isinstance(out.get("hooks"), dict):
            hooks = dict(out["hooks"])
            for event, groups in value.items():
                hooks[event] = [*hooks.get(event, []), *groups]
            out["hooks"] = hooks
        else:
            out[key] = value
    return out


def _codex_config_servers(env: Mapping[str, str]) -> set[str]:
    """MCP server names in the user's `$CODEX_HOME/config.toml` (empty when unreadable)."""
    import tomllib

    from ivoai.client.memoryhooks.hosts import codex_home

    try:
        with open(os.path.join(codex_home(env), "config.toml"), "rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return set()
    servers = doc.get("mcp_servers")
    return set(servers) if isinstance(servers, dict) else set()


def attach_wanted(
    spec: ExecutorSpec, *, off: bool, named: Sequence[str], what: str, env: Mapping[str, str]
) -> bool:
    """Should the session look for `what` (knowledge sources, MCP servers) to attach?

    Not when switched off or when the client is direct-only; else when some were named, or when a
    connection registry exists at all (a cheap check before loading it).

    Raises:
        UsageError: some were named for a direct-only client.
    """
    if off:
        return False
    if spec.mcp_style is None:
        if named:
            raise UsageError(f"{spec.display} is direct-only: ivoai cannot attach {what} to it")
        return False
    from ivoai.client.connections.files import REGISTRY_FILE

    return bool(named) or os.path.exists(
        os.path.join(xdg_root("XDG_CONFIG_HOME", ".config", env), REGISTRY_FILE)
    )


def _user_mcp(
    spec: ExecutorSpec,
    args: LaunchArgs,
    env: Mapping[str, str],
    extras: SessionExtras,
    runtime_dir: Callable[[], str],
    note: Callable[[str], None],
) -> None:
    if not attach_wanted(spec, off=args.no_user_mcp, named=args.mcp_names, what="MCP servers", env=env):
        return
    from ivoai.client.agents import mcp_render
    from ivoai.client.config.secrets import SecretsStore
    from ivoai.client.connections.registry import ConnectionRegistry
    from ivoai.common.paths import xdg_paths

    paths = xdg_paths()
    entries = ConnectionRegistry(paths).load().mcp
    by_name = {e.name: e for e in entries}
    if args.mcp_names:
        known = ", ".join(sorted(by_name)) or "none"
        for name in args.mcp_names:
            if name not in by_name:
                raise UsageError(f"--mcp {name!r}: no such user MCP server (added: {known})")
            if not by_name[name].enabled:
                raise UsageError(
                    f"--mcp {name!r} is disabled; enable it with `ivoai connect mcp enable {name}`"
                )
        chosen = [by_name[n] for n in args.mcp_names]
    else:
        chosen = sorted((e for e in entries if e.enabled), key=lambda e: e.name)
    if not chosen:
        return
    taken = _codex_config_servers(env) if spec.mcp_style == "codex-flags" else set()
    store = SecretsStore(paths)
    rendered: list[tuple[str, str, str | None]] = []
    for entry in chosen:
        if entry.name in mcp_render.RESERVED_NAMES:
            note(f"warning: MCP server {entry.name!r} uses a name ivoai reserves; not attached (rename it)")
            continue
        if entry.name in taken:
            note(
                f"warning: MCP server {entry.name!r} is also defined in Codex's config.toml; ivoai's entry "
                "is not attached (rename one of them)"
            )
            continue
        token: str | None = None
        if entry.auth == "bearer":
            token = store.get(entry.id)
            if not token:
                note(f"warning: MCP server {entry.name!r} has no stored token; not attached (add it again)")
                continue
        if spec.mcp_style == "codex-flags":
            token_env = mcp_render.user_token_env(entry.id) if token else None
            if token_env and token:
                extras.env[token_env] = token
            rendered.append((entry.name, entry.url, token_env))
        else:
            rendered.append((entry.name, entry.url, token))
        extras.user_mcp.append(entry.name)
    if not rendered:
        return
    if spec.mcp_style == "codex-flags":
        extras.args += mcp_render.codex_user_mcp_args(rendered)
    else:
        doc = mcp_render.claude_user_mcp_document(rendered)
        extras.args.append(f"--mcp-config={_write_private_json(runtime_dir(), 'mcp-user.json', doc)}")


def _managed_hooks_installed(client: str, env: Mapping[str, str]) -> bool:
    """Does the ownership manifest record ivoai's hooks in `client`'s own files? (one small JSON read)"""
    import json

    try:
        with open(
            os.path.join(xdg_root("XDG_STATE_HOME", ".local/state", env), "ownership.json"), "rb"
        ) as fh:
            doc = json.loads(fh.read(4 * 1024 * 1024))
    except (OSError, ValueError):
        return False
    items = doc.get("integrations") if isinstance(doc, dict) else None
    return isinstance(items, list) and any(
        isinstance(i, dict) and i.get("component") == "memory-hooks" and i.get("client") == client
        for i in items
    )


def _memory_hooks(
    spec: ExecutorSpec,
    args: LaunchArgs,
    router: Any,
    sources: Sequence[Any],
    env: Mapping[str, str],
    extras: SessionExtras,
    note: Callable[[str], None],
) -> None:
    if spec.name not in ("codex", "claude") or args.no_memory_hooks or router is None:
        return
    if env.get("IVOAI_MEMORY_HOOKS", "").lower() in ("0", "off", "false", "no"):
        return
    memory = [s for s in sources if "memory" in getattr(s, "kinds", ())]
    if not memory:
        return
    if len(memory) == 1:
        destination = memory[0].id
    else:
        from ivoai.client.memoryhooks.flusher import configured_destination
        from ivoai.common.paths import xdg_paths

        wanted = configured_destination(xdg_paths())
        chosen = [s for s in memory if wanted is not None and wanted in s.names()]
        if not chosen:
            note(
                f"memory hooks not attached: {len(memory)} memory sources in this session; choose one with "
                "`ivoai memory hooks destination SOURCE` (or --knowledge-source)"
            )
            return
        destination = chosen[0].id
    from ivoai.client.memoryhooks import hosts
    from ivoai.client.memoryhooks.flusher import ROUTER_ENV, ROUTER_TOKEN_ENV, SOURCE_ENV

    base = router.url.rsplit("/", 1)[0]  # http://127.0.0.1:PORT (the router serves /mcp and the hook route)
    extras.env.update({SOURCE_ENV: destination, ROUTER_ENV: base, ROUTER_TOKEN_ENV: router.token})
    extras.hooks_destination = destination
    if _managed_hooks_installed(spec.name, env):
        return  # the client's own files already run ivoai's hooks; with this environment they use the router
    try:
        hosts.ensure_wrapper(env)
    except (IvoaiError, OSError) as exc:
        note(f"warning: memory hooks not attached ({getattr(exc, 'message', exc)})")
        for key in (SOURCE_ENV, ROUTER_ENV, ROUTER_TOKEN_ENV):
            extras.env.pop(key, None)
        extras.hooks_destination = None
        return
    if spec.name == "codex":
        extras.args += hosts.codex_config_args(env)
        _note_codex_trust_once(env, note)
    else:
        extras.claude_settings = merge_claude_settings(extras.claude_settings, hosts.claude_settings(env))


def _note_codex_trust_once(env: Mapping[str, str], note: Callable[[str], None]) -> None:
    """Say once per user that Codex runs the hooks only after its `/hooks` review."""
    from ivoai.client.memoryhooks.locations import hooks_dir

    marker = os.path.join(hooks_dir(env), "codex-trust-noted")
    if os.path.exists(marker):
        return
    note("memory hooks for Codex run once you trust them: open `/hooks` in Codex (once; they never change)")
    try:
        from ivoai.client.memoryhooks.locations import HOOKS_DIR, state_root
        from ivoai.common.lightio import open_private_dirs, write_atomic

        fd = open_private_dirs(state_root(env), HOOKS_DIR)
        try:
            write_atomic(fd, "codex-trust-noted", b"1\n")
        finally:
            os.close(fd)
    except (IvoaiError, OSError):
        pass


def session_extras(
    spec: ExecutorSpec,
    args: LaunchArgs,
    *,
    router: Any,
    sources: Sequence[Any],
    env: Mapping[str, str],
    runtime_dir: Callable[[], str],
    note: Callable[[str], None],
    claude_settings: Mapping[str, Any] | None = None,
) -> SessionExtras:
    """The session's user MCP servers and memory hooks, as client arguments and environment.

    `claude_settings`: another `--settings` document to merge (Claude reads one per session).

    Raises:
        UsageError: `--mcp` names an unknown or disabled server, or a direct-only client.
    """
    extras = SessionExtras()
    _user_mcp(spec, args, env, extras, runtime_dir, note)
    _memory_hooks(spec, args, router, sources, env, extras, note)
    if spec.name == "claude":
        extras.claude_settings = merge_claude_settings(extras.claude_settings, claude_settings)
        if extras.claude_settings:
            path = _write_private_json(runtime_dir(), "settings.json", extras.claude_settings)
            extras.args.append(f"--settings={path}")
            if any(a == "--settings" or a.startswith("--settings=") for a in args.client_args):
                # Claude keeps only the last --settings (verified with 2.1.197): the user's wins.
                note(
                    "warning: your --settings replaces the per-session settings ivoai passes to Claude; "
                    "memory hooks are not active in this session"
                )
    return extras
