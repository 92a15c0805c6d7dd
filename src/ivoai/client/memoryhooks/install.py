"""The managed installation: ivoai's hooks in each host's own configuration file, for direct use.

`ivoai memory hooks install|status|validate|repair|uninstall [--client codex|claude]`. Sessions started
through `ivoai codex|claude|auto` do not need it (`wiring` adds the hooks per process); it is for users
who also run the clients directly.

- Files: Codex `$CODEX_HOME/hooks.json` (default `~/.codex/hooks.json`), Claude Code
  `$CLAUDE_CONFIG_DIR/settings.json` (default `~/.claude/settings.json`): the hosts' supported
  locations. A symlinked file is edited at its target (dotfile managers keep their link).
- Edits are text splices (`jsonedit`): one matcher group per event appended where the user's hooks
  are, in the file's own indentation and line endings; every other byte stays as it was. Each splice
  (file, JSON pointer of the container, exact text, inserted values) is recorded in the ownership
  manifest's `integrations` before it is written, so uninstall removes exactly that and nothing else.
- A file ivoai creates is recorded as created; uninstall deletes it only if nothing else was added.
- The hook definitions name the managed wrapper (`hosts.hook_command`), never this ivoai's own path,
  so they stay byte-identical when ivoai moves: Codex's hook trust, keyed to the definition, survives
  `repair`, which rewrites the wrapper and re-adds only definitions that are missing or were altered.
- Trust is the user's: ivoai never marks a hook trusted and never bypasses Codex's review. `status`
  reports Codex's trust state from the real `codex app-server` (`hooks/list`).
- Writes are atomic (private staging file, rename), keep the file's mode, and are compare-and-swap:
  if the host rewrote the file meanwhile, the edit is redone on the new content.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ivoai.client.config.ownership import IntegrationRecord, Ownership, OwnershipManifest
from ivoai.client.memoryhooks import hosts, jsonedit
from ivoai.client.memoryhooks.locations import wrapper_path
from ivoai.common.errors import IvoaiError, ValidationError
from ivoai.common.fsio import file_lock
from ivoai.common.limits import MEMORY_HOOK_CONFIG_MAX_BYTES
from ivoai.common.paths import XdgPaths, xdg_paths

COMPONENT = "memory-hooks"
CAS_ATTEMPTS = 3


class HookInstallError(IvoaiError):
    code = "memory_hooks_install"


@dataclass
class ClientResult:
    """What one command did for one client."""

    client: str
    file: str
    action: str  # installed | already_installed | repaired | removed | not_installed | skipped
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    created_file: bool = False
    deleted_file: bool = False
    wrapper_rewritten: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "file": self.file,
            "action": self.action,
            "added": self.added,
            "replaced": self.replaced,
            "removed": self.removed,
            "created_file": self.created_file,
            "deleted_file": self.deleted_file,
            "wrapper_rewritten": self.wrapper_rewritten,
            "notes": self.notes,
        }


def default_clients(env: Mapping[str, str] | None = None) -> list[str]:
    """Clients to act on without `--client`: those installed or already configured here."""
    from ivoai.client.agents.executors import discover

    found = []
    for client in hosts.CLIENTS:
        home = hosts.codex_home(env) if client == "codex" else hosts.claude_home(env)
        if discover(client, env) is not None or os.path.isdir(home):
            found.append(client)
    return found


# ---- reading and writing the host file ----


def _target(path: str) -> str:
    """Edit a symlinked settings file at its target, so a dotfile manager's link stays a link."""
    return os.path.realpath(path) if os.path.islink(path) else path


def _read(path: str) -> tuple[str | None, os.stat_result | None]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(st.st_mode):
        raise HookInstallError(f"{path} is not a regular file; ivoai left it unchanged")
    if st.st_size > MEMORY_HOOK_CONFIG_MAX_BYTES:
        raise HookInstallError(
            f"{path} is {st.st_size} bytes, over the {MEMORY_HOOK_CONFIG_MAX_BYTES}-byte limit ivoai edits"
        )
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8"), st
    except UnicodeDecodeError:
        raise HookInstallError(f"{path} is not UTF-8; ivoai left it unchanged") from None


def _write(path: str, text: str, before: os.stat_result | None) -> None:
    """Atomically replace `path` with `text` (mode kept; 0600 for a new file) unless it changed meanwhile."""
    current, st = _read(path)
    if (st is None) != (before is None) or (
        st is not None
        and before is not None
        and (st.st_mtime_ns, st.st_size) != (before.st_mtime_ns, before.st_size)
    ):
        raise _Changed
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    mode = stat.S_IMODE(before.st_mode) if before is not None else 0o600
    tmp = os.path.join(directory, f".{os.path.basename(path)}.ivoai-{os.urandom(6).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        try:
            os.write(fd, text.encode("utf-8"))
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        tmp = ""
    finally:
        if tmp:
            os.unlink(tmp)
    del current


class _Changed(Exception):
    """The host file changed between our read and our write: redo the edit."""


def _parse_object(path: str, text: str) -> jsonedit.Node:
    try:
        root = jsonedit.parse(text)
    except jsonedit.JsonSyntaxError as exc:
        raise HookInstallError(f"{path}: {exc}; ivoai left it unchanged") from None
    if root.kind != "object":
        raise HookInstallError(f"{path} is not a JSON object; ivoai left it unchanged")
    return root


# ---- what is there ----


def _expected(client: str, env: Mapping[str, str] | None) -> dict[str, dict[str, Any]]:
    return {event: hosts.group(event, client, env) for event in hosts.EVENTS}


def _ours(handler: Any, env: Mapping[str, str] | None) -> bool:
    """A handler ivoai wrote: its command runs the managed wrapper."""
    command = handler.get("command") if isinstance(handler, dict) else None
    return isinstance(command, str) and command.startswith(hosts.sh_quote(wrapper_path(env)) + " ")


def inspect(client: str, text: str | None, env: Mapping[str, str] | None) -> dict[str, str]:
    """Per event: `ok` (exact definition present), `altered` (ours, changed), or `missing`."""
    expected = _expected(client, env)
    out = dict.fromkeys(hosts.EVENTS, "missing")
    if text is None:
        return out
    try:
        doc = jsonedit.value_of(text, jsonedit.parse(text))
    except (jsonedit.JsonSyntaxError, ValueError):
        return out
    hooks = doc.get("hooks") if isinstance(doc, dict) else None
    if not isinstance(hooks, dict):
        return out
    for event in hosts.EVENTS:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        if expected[event] in groups:
            out[event] = "ok"
        elif any(
            isinstance(g, dict)
            and isinstance(g.get("hooks"), list)
            and any(_ours(h, env) for h in g["hooks"])
            for g in groups
        ):
            out[event] = "altered"
    return out


def _altered_groups(client: str, text: str, event: str, env: Mapping[str, str] | None) -> list[Any]:
    doc = jsonedit.value_of(text, jsonedit.parse(text))
    groups = doc.get("hooks", {}).get(event, [])
    return [
        g
        for g in groups
        if isinstance(g, dict)
        and isinstance(g.get("hooks"), list)
        and any(_ours(h, env) for h in g["hooks"])
        and g != hosts.group(event, client, env)
    ]


# ---- install / repair ----


def _record_wrapper(paths: XdgPaths, env: Mapping[str, str] | None) -> bool:
    rewritten = hosts.ensure_wrapper(env)
    OwnershipManifest(paths).record(COMPONENT, wrapper_path(env), Ownership.MANAGED)
    return rewritten


def _splice(
    path: str, client: str, text: str | None, events: list[str], env: Mapping[str, str] | None
) -> tuple[str, list[IntegrationRecord], bool]:
    """Text with ivoai's groups for `events` added, the records of the splices, created-file flag."""
    records: list[IntegrationRecord] = []
    created = text is None
    if text is None:
        text = "{}\n"
    unit = jsonedit.indent_unit(text)

    def record(location: str, inserted: str, content: list[Any]) -> None:
        records.append(
            IntegrationRecord(
                id="int_" + os.urandom(12).hex(),
                component=COMPONENT,
                client=client,
                file=path,
                format="json",
                location=location,
                text=inserted,
                content=content,
            )
        )

    root = _parse_object(path, text)
    hooks = root.member("hooks")
    if hooks is None:
        value = {event: [hosts.group(event, client, env)] for event in events}
        text, _at, inserted = jsonedit.insert_members(text, root, [("hooks", value)], unit)
        record("", inserted, [["hooks", value]])
    elif hooks.kind != "object":
        raise HookInstallError(f'{path}: "hooks" is not an object; ivoai left the file unchanged')
    else:
        new_members: list[tuple[str, Any]] = []
        for event in events:
            root = jsonedit.parse(text)
            hooks = root.at("/hooks")
            assert hooks is not None
            groups = hooks.member(event)
            value = hosts.group(event, client, env)
            if groups is None:
                new_members.append((event, [value]))
            elif groups.kind != "array":
                raise HookInstallError(
                    f'{path}: "hooks.{event}" is not a list; ivoai left the file unchanged'
                )
            else:
                text, _at, inserted = jsonedit.insert_item(text, groups, value, unit)
                record(f"/hooks/{event}", inserted, [value])
        if new_members:
            hooks = jsonedit.parse(text).at("/hooks")
            assert hooks is not None
            text, _at, inserted = jsonedit.insert_members(text, hooks, new_members, unit)
            record("/hooks", inserted, [[k, v] for k, v in new_members])
    jsonedit.parse(text)  # never write a file that is not JSON
    if created and records:
        from dataclasses import replace

        records[0] = replace(records[0], created_file=True, file_text=text)
    return text, records, created


def install(
    client: str, paths: XdgPaths | None = None, env: Mapping[str, str] | None = None, *, repair: bool = False
) -> ClientResult:
    """Add ivoai's hook definitions to `client`'s configuration file (idempotent).

    With `repair`, definitions of ivoai's that were altered are replaced by the expected ones.

    Raises:
        HookInstallError: the file is not a JSON object, not UTF-8, too large, or not a regular file.
    """
    paths = paths or xdg_paths()
    if client not in hosts.CLIENTS:
        raise ValidationError(f"--client must be one of {', '.join(hosts.CLIENTS)}, not {client!r}")
    path = _target(hosts.config_file(client, env))
    result = ClientResult(client, path, "already_installed")
    result.wrapper_rewritten = _record_wrapper(paths, env)
    manifest = OwnershipManifest(paths)
    with file_lock(paths.state, paths.state / ".memory-hooks.lock"):
        for _attempt in range(CAS_ATTEMPTS):
            text, before = _read(path)
            state = inspect(client, text, env)
            replaced: list[str] = []
            if repair and text is not None:
                for event in hosts.EVENTS:
                    if state[event] != "altered":
                        continue
                    for old in _altered_groups(client, text, event, env):
                        text, _how = jsonedit.remove_insertion(text, f"/hooks/{event}", "\0", [old])
                    replaced.append(event)
                    state[event] = "missing"
            missing = [e for e in hosts.EVENTS if state[e] == "missing"]
            altered = [e for e in hosts.EVENTS if state[e] == "altered"]
            notes = [f"{e}: ivoai's definition was changed by hand; `repair` replaces it" for e in altered]
            if not missing:
                result.notes += notes
                return result
            new_text, records, created = _splice(path, client, text, missing, env)
            for record in records:
                manifest.record_integration(record)
            try:
                _write(path, new_text, before)
            except _Changed:
                for record in records:
                    manifest.forget_integration(record.id)
                continue
            except OSError as exc:
                for record in records:
                    manifest.forget_integration(record.id)
                raise HookInstallError(f"{path} could not be written: {exc.strerror or exc}") from None
            result.action = "repaired" if repair and (replaced or result.wrapper_rewritten) else "installed"
            result.added = [e for e in missing if e not in replaced]
            result.replaced = replaced
            result.created_file = created
            result.notes += notes
            return result
    raise HookInstallError(f"{path} kept changing while ivoai edited it; try again")


def repair(client: str, paths: XdgPaths | None = None, env: Mapping[str, str] | None = None) -> ClientResult:
    """Rewrite a stale wrapper and re-add missing or altered definitions; intact ones are not touched."""
    result = install(client, paths, env, repair=True)
    if result.action == "already_installed" and result.wrapper_rewritten:
        result.action = "repaired"
    return result


# ---- uninstall ----


def uninstall(
    client: str, paths: XdgPaths | None = None, env: Mapping[str, str] | None = None
) -> ClientResult:
    """Remove exactly what the manifest records for `client`; every other byte of the file stays.

    Raises:
        HookInstallError: the file is no longer JSON (nothing is changed; the records are kept).
    """
    paths = paths or xdg_paths()
    manifest = OwnershipManifest(paths)
    records = manifest.integrations(COMPONENT, client)
    path = _target(hosts.config_file(client, env))
    result = ClientResult(client, path, "not_installed")
    if not records:
        return result
    with file_lock(paths.state, paths.state / ".memory-hooks.lock"):
        for _attempt in range(CAS_ATTEMPTS):
            files = sorted({r.file for r in records})
            done: list[IntegrationRecord] = []
            try:
                for file in files:
                    text, before = _read(file)
                    mine = [r for r in records if r.file == file]
                    if text is None:
                        done += mine
                        continue
                    original = text
                    created = next((r for r in mine if r.created_file), None)
                    if created is not None and text == created.file_text:
                        os.unlink(file)
                        result.deleted_file = True
                        done += mine
                        continue
                    for record in reversed(mine):  # newest first: later splices may sit inside earlier ones
                        try:
                            text, how = jsonedit.remove_insertion(
                                text, record.location, record.text, record.content
                            )
                        except jsonedit.JsonSyntaxError as exc:
                            raise HookInstallError(
                                f"{file}: {exc}; ivoai removed nothing (fix the file, then uninstall again)"
                            ) from None
                        if how != "absent":
                            result.removed.append(record.location or "/")
                        done.append(record)
                    if created is not None and text.strip() in ("{}", ""):
                        os.unlink(file)
                        result.deleted_file = True
                    elif text != original:
                        _write(file, text, before)
            except _Changed:
                continue
            for record in done:
                manifest.forget_integration(record.id)
            result.action = "removed"
            return result
    raise HookInstallError(f"{path} kept changing while ivoai edited it; try again")


def remove_wrapper(paths: XdgPaths | None = None, env: Mapping[str, str] | None = None) -> bool:
    """Delete the managed wrapper once no client uses it; True if it was removed."""
    paths = paths or xdg_paths()
    manifest = OwnershipManifest(paths)
    if manifest.integrations(COMPONENT):
        return False
    path = wrapper_path(env)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    manifest.forget(path)
    return True


# ---- status and validation ----


def codex_trust(env: Mapping[str, str] | None, *, session: bool = False) -> tuple[bool | None, str]:
    """(all of ivoai's Codex hooks trusted?, detail) from the real `codex app-server`; None: cannot tell."""
    from ivoai.client.agents.executors import discover

    env = os.environ if env is None else env
    found = discover("codex", env)
    if found is None:
        return None, "codex is not installed here"
    extra = hosts.codex_config_args(env) if session else None
    try:
        listed = hosts.codex_hook_list(found[0], env, extra_args=extra)
    except (OSError, RuntimeError) as exc:
        return None, f"codex could not list hooks ({exc})"
    wanted_source = "sessionFlags" if session else "user"
    ours = [
        h
        for h in listed
        if h.get("source") == wanted_source
        and isinstance(h.get("command"), str)
        and h["command"].startswith(hosts.sh_quote(wrapper_path(env)) + " ")
    ]
    if not ours:
        return False, "codex does not list ivoai's hooks"
    states = sorted({str(h.get("trustStatus")) for h in ours})
    if states == ["trusted"]:
        return True, f"{len(ours)} hooks trusted"
    return False, (
        f"trust status {', '.join(states)}: open `/hooks` in Codex once to review and trust ivoai's hooks"
    )


def status(
    client: str, paths: XdgPaths | None = None, env: Mapping[str, str] | None = None, *, probe: bool = True
) -> dict[str, Any]:
    """Installed, trusted (when the host can tell), last event sent, spool size, last error."""
    from ivoai.client.memoryhooks import spool
    from ivoai.client.memoryhooks import state as hook_state
    from ivoai.client.memoryhooks.locations import state_root

    paths = paths or xdg_paths()
    path = _target(hosts.config_file(client, env))
    records = OwnershipManifest(paths).integrations(COMPONENT, client)
    try:
        text, _st = _read(path)
        events = inspect(client, text, env)
        file_error = None
    except HookInstallError as exc:
        events, file_error = dict.fromkeys(hosts.EVENTS, "missing"), exc.message
    ok = [e for e, s in events.items() if s == "ok"]
    installed = bool(records) and len(ok) == len(hosts.EVENTS)
    trusted: bool | None
    if client == "codex" and installed and probe:
        trusted, trust_detail = codex_trust(env)
    elif client == "codex":
        trusted, trust_detail = None, "not asked (not installed, or --no-probe)"
    else:
        trusted, trust_detail = None, "Claude Code does not review hooks; user settings hooks run as written"
    wrapper = hosts.read_wrapper(env)
    doc = hook_state.load(state_root(env))
    client_state = doc.get("clients", {}).get(client, {}) if isinstance(doc.get("clients"), dict) else {}
    return {
        "client": client,
        "file": path,
        "installed": installed,
        "state": "installed" if installed else ("partial" if ok or records else "not_installed"),
        "events": events,
        "file_error": file_error,
        "trusted": trusted,
        "trust_detail": trust_detail,
        "wrapper": "missing"
        if wrapper is None
        else ("ok" if wrapper == hosts.wrapper_text(hosts.ivoai_argv()) else "stale"),
        "session_scoped": "ivoai codex|claude|auto add these hooks per session when they are not installed",
        "last_event_sent_at": client_state.get("last_sent_at"),
        "spool": spool.stats(state_root(env)),
        "last_error": doc.get("last_error"),
        "last_rejection": doc.get("last_rejection"),
        "sent_events": int(doc.get("sent_events", 0)),
        "lost_events": lost_events(env),
    }


def lost_events(env: Mapping[str, str] | None = None) -> int:
    """Events hook processes could not spool (their budget ended first, or the spool failed)."""
    from ivoai.client.memoryhooks.locations import hooks_dir
    from ivoai.client.memoryhooks.runner import LOST_FILE

    try:
        return os.stat(os.path.join(hooks_dir(env), LOST_FILE)).st_size
    except OSError:
        return 0


def validate(
    client: str, paths: XdgPaths | None = None, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Checks: the file parses, ivoai's definitions are exact, the wrapper answers, the host accepts them."""
    import subprocess

    from ivoai.client.memoryhooks.runner import PROBE_ANSWER

    checks: list[dict[str, Any]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        checks.append({"name": name, "ok": ok, "detail": detail})

    path = _target(hosts.config_file(client, env))
    try:
        text, _st = _read(path)
        if text is None:
            check("file", False, f"{path} does not exist; run `ivoai memory hooks install --client {client}`")
        else:
            _parse_object(path, text)
            check("file", True, f"{path} is a JSON object")
        events = inspect(client, text, env)
    except HookInstallError as exc:
        check("file", False, exc.message)
        events = dict.fromkeys(hosts.EVENTS, "missing")
    bad = {e: s for e, s in events.items() if s != "ok"}
    check(
        "definitions",
        not bad,
        "all present and exact"
        if not bad
        else ", ".join(f"{e} {s}" for e, s in bad.items()) + "; run repair",
    )
    wrapper = wrapper_path(env)
    try:
        answer = subprocess.run(
            [wrapper, "--probe"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        works = answer.returncode == 0 and answer.stdout == PROBE_ANSWER
        check(
            "wrapper",
            works,
            wrapper + (" runs ivoai" if works else f" did not answer (exit {answer.returncode})"),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        check("wrapper", False, f"{wrapper}: {exc}")
    if client == "codex":
        trusted, detail = codex_trust(env)
        listed = trusted is not None and "does not list" not in detail
        check("host", listed, "codex lists ivoai's hooks (" + detail + ")" if listed else detail)
    else:
        ok, detail = _claude_shape(text if "text" in locals() and text is not None else None)
        check("host", ok, detail)
    return {"client": client, "file": path, "ok": all(c["ok"] for c in checks), "checks": checks}


def _claude_shape(text: str | None) -> tuple[bool, str]:
    """Claude Code's documented hooks schema (it has no command that lists hooks)."""
    if text is None:
        return False, "no settings file"
    doc = jsonedit.value_of(text, jsonedit.parse(text))
    hooks = doc.get("hooks") if isinstance(doc, dict) else None
    if not isinstance(hooks, dict):
        return False, '"hooks" is missing or not an object'
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            return False, f'"hooks.{event}" is not a list'
        for g in groups:
            if not isinstance(g, dict) or not isinstance(g.get("hooks"), list):
                return False, f'"hooks.{event}" has a group without a "hooks" list'
            for h in g["hooks"]:
                if not isinstance(h, dict) or h.get("type") not in (
                    "command",
                    "prompt",
                    "agent",
                    "http",
                    "mcp_tool",
                ):
                    return False, f'"hooks.{event}" has a hook without a known "type"'
    return True, "the settings match Claude Code's hooks schema"
