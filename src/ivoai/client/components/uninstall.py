"""`ivoai uninstall [--dry-run] [--yes]`: remove what ivoai owns, exactly, and nothing else.

What goes, in this order (so an interrupted uninstall can simply be run again):

1. every `file` and `config_entry` the ownership manifest records outside ivoai's roots, each only
   while it still holds what ivoai wrote (its recorded SHA-256); a value the user changed since stays
   and is reported. Entries are found by their recorded owner and location, never by a pattern;
2. every `integrations` record (the exact text edits of the managed memory hooks in `~/.codex/hooks.json`
   and Claude's `settings.json`, `docs/hooks.md`), undone by the subsystem that made it, which removes
   exactly the recorded text (or only the recorded values when the user edited the file since). If
   an edit cannot be undone, the state root, which holds the records, is kept and the reason shown;
3. the ivoai XDG roots: cache, data (managed launchers and installs), config, then state (the
   ownership manifest goes last).

What stays: every `pre_existing` executable (a `codex` the user had on PATH), and the vendors' own
state and logins (`~/.codex`, `~/.claude`, `~/.claude.json`): ivoai never opens those files here.
The ivoai Python package itself is removed with the tool that installed it (`pipx uninstall ivoai`).
A root that is a symlink is not followed; it is reported for removal by hand. Uninstall refuses to
run while an ivoai session is live.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ivoai.client.components.errors import ComponentError
from ivoai.client.components.state import components_lock
from ivoai.client.config.ownership import Ownership, OwnershipEntry, OwnershipManifest, canonical_digest
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import atomic_write_in_dir
from ivoai.common.limits import UNINSTALL_CONFIG_MAX_BYTES
from ivoai.common.paths import XdgPaths

UNINSTALL_SCHEMA = 1


@dataclass
class Item:
    """One thing uninstall removes, keeps or skips, and why."""

    kind: str  # root | config_entry | file | integration | executable | directory | vendor_state
    path: str
    action: str  # remove | keep | skip | gone
    reason: str
    component: str | None = None
    owner: str | None = None
    pointer: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class UninstallReport:
    dry_run: bool
    items: list[Item]
    blocked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.blocked and not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": UNINSTALL_SCHEMA,
            "ok": self.ok,
            "dry_run": self.dry_run,
            "blocked": self.blocked,
            "errors": self.errors,
            "items": [i.to_dict() for i in self.items],
            "hint": "remove the ivoai package with the tool that installed it (e.g. `pipx uninstall ivoai`)",
        }


def _read_third_party(path: Path) -> tuple[bytes, int]:
    """A third-party config file's bytes and mode, without following a final symlink."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ComponentError(f"{path} is not a regular file")
        data = os.read(fd, UNINSTALL_CONFIG_MAX_BYTES + 1)
        if len(data) > UNINSTALL_CONFIG_MAX_BYTES:
            raise ComponentError(f"{path} exceeds {UNINSTALL_CONFIG_MAX_BYTES} bytes; edit it by hand")
        return data, stat.S_IMODE(st.st_mode)
    finally:
        os.close(fd)


def _plain(value: Any) -> Any:
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else value


def _walk(doc: Any, keys: tuple[str, ...]) -> Any:
    node = doc
    for key in keys:
        if not hasattr(node, "__contains__") or isinstance(node, str | bytes) or key not in node:
            return None
        node = node[key]
    return node


def remove_config_entry(entry: OwnershipEntry, *, apply: bool) -> tuple[str, str]:
    """(action, reason) for one recorded config entry; with `apply`, the file is rewritten without it."""
    path = Path(entry.path)
    try:
        raw, mode = _read_third_party(path)
    except FileNotFoundError:
        return "gone", "the file no longer exists"
    except OSError as exc:
        if os.path.islink(path):
            return "skip", "the file is a symlink; remove the entry by hand"
        return "skip", f"cannot read it ({exc.strerror})"
    except IvoaiError as exc:
        return "skip", exc.message
    try:
        if entry.format == "json":
            doc: Any = json.loads(raw)
        else:
            import tomlkit

            doc = tomlkit.parse(raw.decode("utf-8"))
    except Exception:  # noqa: BLE001 - json and tomlkit raise unrelated types for a bad file
        return "skip", f"the file is not valid {entry.format}; remove the entry by hand"
    if entry.mode == "element":
        array = _walk(doc, entry.pointer)
        if not isinstance(array, list):
            return "gone", "the array no longer exists"
        index = next(
            (i for i, v in enumerate(array) if canonical_digest(_plain(v)) == entry.value_sha256), None
        )
        if index is None:
            return "keep", "no element equals what ivoai wrote (changed or removed since)"
        if apply:
            del array[index]
    else:
        parent = _walk(doc, entry.pointer[:-1])
        key = entry.pointer[-1]
        if parent is None or not hasattr(parent, "__contains__") or key not in parent:
            return "gone", "the key no longer exists"
        if canonical_digest(_plain(parent[key])) != entry.value_sha256:
            return "keep", "the value changed since ivoai wrote it; left in place"
        if apply:
            del parent[key]
    if apply:
        if entry.format == "json":
            text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
        else:
            import tomlkit

            text = tomlkit.dumps(doc)
        atomic_write_in_dir(path, text.encode("utf-8"), mode=mode)
    return "remove", f"written by ivoai ({entry.owner})"


def _file_action(entry: OwnershipEntry) -> tuple[str, str]:
    from ivoai.client.components.journal import sha256_or_none

    path = Path(entry.path)
    if os.path.islink(path):
        return "skip", "it is now a symlink; remove it by hand"
    try:
        digest = sha256_or_none(path)
    except IvoaiError as exc:
        return "skip", exc.message
    if digest is None:
        return "gone", "already removed"
    if digest != entry.sha256:
        return "keep", "changed since ivoai wrote it; left in place"
    return "remove", f"written by ivoai ({entry.owner})"


def _within(path: str, roots: list[Path]) -> bool:
    return any(
        os.path.commonpath([os.path.abspath(path), os.path.abspath(r)]) == os.path.abspath(r) for r in roots
    )


def plan(paths: XdgPaths, env: Mapping[str, str]) -> UninstallReport:
    """What uninstall would do now (reads the ownership manifest and the recorded entries only).

    Raises:
        IvoaiError: the ownership manifest cannot be read (entries outside the roots could be missed).
    """
    items: list[Item] = []
    roots = [paths.cache, paths.data, paths.config, paths.state]
    for entry in OwnershipManifest(paths).entries():
        if entry.ownership is Ownership.PRE_EXISTING:
            action, reason = "keep", "pre-existing: it was yours before ivoai"
        elif entry.kind == "config_entry":
            action, reason = remove_config_entry(entry, apply=False)
        elif entry.kind == "file" and not _within(entry.path, roots):
            action, reason = _file_action(entry)
        else:
            action, reason = "remove", "managed by ivoai (removed with its root)"
        items.append(
            Item(entry.kind, entry.path, action, reason, entry.component, entry.owner, list(entry.pointer))
        )
    items.extend(_integration_items(paths))
    for name, root in (
        ("cache", paths.cache),
        ("data", paths.data),
        ("config", paths.config),
        ("state", paths.state),
    ):
        if os.path.islink(root):
            items.append(Item("root", str(root), "skip", f"the {name} root is a symlink; remove it by hand"))
        elif os.path.lexists(root):
            items.append(Item("root", str(root), "remove", f"ivoai's {name} root"))
    codex_home = env.get("CODEX_HOME", "")
    home = Path(env.get("HOME", os.path.expanduser("~")))
    vendor = [
        Path(codex_home) if os.path.isabs(codex_home) else home / ".codex",
        home / ".claude",
        home / ".claude.json",
    ]
    for path in vendor:
        items.append(
            Item("vendor_state", str(path), "keep", "vendor login and settings: never read or touched")
        )
    report = UninstallReport(dry_run=True, items=items)
    report.blocked = _live_sessions(paths)
    return report


# component of an `integrations` record -> the function that undoes that component's edits for one
# client (it removes exactly what it recorded and forgets the records).
INTEGRATION_REMOVERS: dict[str, str] = {"memory-hooks": "ivoai.client.memoryhooks.install:uninstall"}


def _integration_items(paths: XdgPaths) -> list[Item]:
    items = []
    for record in OwnershipManifest(paths).integrations():
        known = record.component in INTEGRATION_REMOVERS
        action = "remove" if known else "keep"
        reason = (
            f"ivoai's {record.component} edit for {record.client} at {record.location or '/'}"
            if known
            else f"no remover for component {record.component!r} in this ivoai; left in place"
        )
        items.append(
            Item("integration", record.file, action, reason, record.component, record.component,
                 [record.client, record.location])
        )  # fmt: skip
    return items


def _undo_integrations(paths: XdgPaths, env: Mapping[str, str], report: UninstallReport) -> bool:
    """Undo every recorded integration through its subsystem; False if any edit is left in place."""
    import importlib

    done = True
    pairs = sorted({(i.component or "", i.pointer[0]) for i in report.items if i.kind == "integration"})
    for component, client in pairs:
        spec = INTEGRATION_REMOVERS.get(component)
        if spec is None:
            done = False
            continue
        module, _, attr = spec.partition(":")
        try:
            getattr(importlib.import_module(module), attr)(client, paths, dict(env))
        except (IvoaiError, OSError) as exc:
            done = False
            report.errors.append(f"{component} ({client}): {getattr(exc, 'message', None) or exc}")
    return done


def _live_sessions(paths: XdgPaths) -> list[str]:
    try:
        from ivoai.client.sessions.records import SessionStore

        records, _ = SessionStore(paths).list()
    except (IvoaiError, OSError):
        return []
    return [
        f"session {r.id} is live; stop it first (`ivoai session stop {r.id}`)"
        for r in records
        if r.status() == "live"
    ]


def run_uninstall(paths: XdgPaths, env: Mapping[str, str], *, dry_run: bool) -> UninstallReport:
    """Plan, then (unless `dry_run`) remove exactly the planned items; see the module docstring."""
    lock = contextlib.nullcontext() if not paths.state.is_dir() or dry_run else components_lock(paths)
    with lock:
        report = plan(paths, env)
        report.dry_run = dry_run
        if dry_run or report.blocked:
            return report
        entries = {(e.path, e.pointer): e for e in OwnershipManifest(paths).entries()}
        for item in report.items:
            if item.action != "remove" or item.kind not in ("config_entry", "file"):
                continue
            entry = entries.get((item.path, tuple(item.pointer)))
            if entry is None or _within(item.path, [paths.data, paths.config, paths.state, paths.cache]):
                continue
            try:
                if item.kind == "config_entry":
                    item.action, item.reason = remove_config_entry(entry, apply=True)
                else:
                    os.unlink(item.path)
            except (IvoaiError, OSError) as exc:
                report.errors.append(f"{item.path}: {getattr(exc, 'message', None) or exc}")
        if not _undo_integrations(paths, env, report):
            for item in report.items:
                if item.kind == "root" and item.path == str(paths.state) and item.action == "remove":
                    item.action = "keep"
                    item.reason = "holds the records of edits that could not be undone (see errors)"
        for item in report.items:
            if item.kind == "root" and item.action == "remove":
                try:
                    shutil.rmtree(item.path)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    report.errors.append(f"{item.path}: {exc.strerror or exc}")
        return report
