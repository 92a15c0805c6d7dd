"""`ivoai update [--dry-run]` and `ivoai update --rollback [--force]`, as journaled transactions.

Update moves every *installed* component whose pin differs from this ivoai's manifest to the new
pin, and every persisted file whose schema is older than this ivoai's to the current schema:

* PREPARE: stage each new pin beside the old install and probe it there; snapshot every file the
  transaction may change (see `journal`). `--dry-run` stops here: it stages and probes, reports the
  plan, and removes what it staged.
* PROMOTE: atomically replace the launchers; write components.json.
* MIGRATE: apply the migration registry file by file (each file replaced atomically).
* SETUP: record ownership of the new installs.
* VERIFY: the compatibility probe through each promoted launcher, then doctor; a failure rolls the
  whole transaction back.
* COMMIT: record the new digests; keep the previous install and the snapshot for `--rollback`.

Rollback restores the previous launchers and the snapshotted state byte for byte. Files changed
after the commit (their digest differs from the one recorded at COMMIT) are a conflict: nothing is
done without `--force`, which overwrites them. Session records written after the commit in a newer
schema are migrated *down* to the schema the restored ivoai state expects. Rollback is itself a
journaled transaction.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ivoai.client.components import engine
from ivoai.client.components.errors import (
    MigrationError,
    NothingToRollBackError,
    RollbackConflictError,
    UpdateError,
)
from ivoai.client.components.installers import InstallContext
from ivoai.client.components.journal import (
    Transaction,
    kill_point,
    last_update,
    recover,
    roots,
    sha256_or_none,
)
from ivoai.client.components.manifest import Manifest, Pin, resolve
from ivoai.client.components.state import (
    Installed,
    bin_dir,
    components_file,
    components_lock,
    now,
    read_state,
    write_state,
)
from ivoai.client.config.migrations import DEFAULT_REGISTRY, Registry, Store
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import atomic_write

UPDATE_SCHEMA = 1


@dataclass
class Change:
    """One component moving from its installed pin to the manifest's."""

    name: str
    from_version: str
    to_version: str
    from_generation: str
    to_generation: str
    probe: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class UpdateReport:
    """What an update (or dry run, or rollback) did or would do."""

    action: str  # up_to_date | updated | dry_run | rolled_back | failed
    components: list[Change] = field(default_factory=list)
    migrations: list[dict[str, Any]] = field(default_factory=list)
    recovered: dict[str, Any] | None = None
    txid: str | None = None
    verify: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    test_manifest: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": UPDATE_SCHEMA,
            "action": self.action,
            "components": [c.to_dict() for c in self.components],
            "migrations": self.migrations,
            "recovered": self.recovered,
            "txid": self.txid,
            "verify": self.verify,
            "warnings": self.warnings,
            "test_manifest": self.test_manifest,
        }


def _rel(ctx: InstallContext, root: str, path: os.PathLike[str] | str) -> tuple[str, str]:
    return root, os.path.relpath(path, roots(ctx.paths)[root])


def plan(
    ctx: InstallContext, manifest: Manifest, registry: Registry
) -> tuple[list[tuple[Pin, Installed]], list[dict[str, Any]]]:
    """(component pins to move, pending migrations) against the current installed state."""
    state = read_state(ctx.paths)
    moves: list[tuple[Pin, Installed]] = []
    for name, entry in state.items():
        if name not in manifest.components:
            continue  # a component this ivoai no longer ships stays as it is
        pin = resolve(manifest.components[name])
        if pin.digest != entry.digest:
            moves.append((pin, entry))
    migrations = [
        {"store": store.name, "file": str(path), "from": version, "to": store.current}
        for store, path, version in registry.pending(ctx.paths)
    ]
    return moves, migrations


def _verify(ctx: InstallContext, changes: list[tuple[Pin, Change]]) -> dict[str, Any]:
    """Probe each updated component through its promoted launcher, then run doctor.

    Raises:
        UpdateError: a probe failed or doctor reports a problem.
    """
    from ivoai.client.doctor import run_doctor

    for pin, change in changes:
        change.probe = engine.probe_installed(pin, ctx)
    report = run_doctor(ctx.paths)
    if not report.ok:
        raise UpdateError(f"doctor found problems after the update: {'; '.join(report.problems)[:400]}")
    return {"probes": {c.name: c.probe for _, c in changes}, "doctor_ok": True}


def run_update(
    ctx: InstallContext,
    manifest: Manifest,
    *,
    dry_run: bool = False,
    registry: Registry = DEFAULT_REGISTRY,
    verify: bool = True,
) -> UpdateReport:
    """Update installed components and persisted schemas to this ivoai's pins (see module docstring).

    Raises:
        UpdateError: the update failed and was rolled back (the message says why).
    """
    with components_lock(ctx.paths):
        recovered = recover(ctx)
        moves, migrations = plan(ctx, manifest, registry)
        changes = [
            (pin, Change(pin.name, entry.version, pin.version, entry.generation, pin.generation))
            for pin, entry in moves
        ]
        report = UpdateReport(
            "up_to_date", [c for _, c in changes], migrations, recovered, test_manifest=manifest.test_override
        )
        if dry_run:
            return _dry_run(ctx, manifest, changes, report)
        if not changes and not migrations:
            return report
        tx = Transaction.begin(ctx.paths, "update", {"components": [c.to_dict() for _, c in changes]})
        report.txid = tx.txid
        try:
            _apply(ctx, manifest, registry, tx, changes, report, verify)
        except BaseException as exc:
            if tx.phase == "COMMIT":
                raise  # committed: the next run finishes the bookkeeping (journal at COMMIT)
            tx.abort()
            if isinstance(exc, IvoaiError):
                kind = MigrationError if tx.phase == "MIGRATE" else UpdateError
                raise kind(f"update rolled back at {tx.phase}: {exc.message}") from None
            raise
        report.action = "updated"
        return report


def _dry_run(
    ctx: InstallContext, manifest: Manifest, changes: list[tuple[Pin, Change]], report: UpdateReport
) -> UpdateReport:
    """Stage and probe each change, then remove what was staged; nothing live changes."""
    report.action = "dry_run"
    node_cache: dict[str, object] = {}
    for pin, change in changes:
        existed = engine.generation_dir(ctx, pin).exists()
        try:
            install = engine.stage(pin, ctx)
            choice = engine.choose_node(pin, ctx, manifest, node_cache)
            change.probe = engine.probe_staged(
                pin, install, engine.launcher_contents(pin, install, choice.path), ctx
            )
        finally:
            if not existed:
                shutil.rmtree(engine.generation_dir(ctx, pin), ignore_errors=True)
    return report


def _apply(
    ctx: InstallContext,
    manifest: Manifest,
    registry: Registry,
    tx: Transaction,
    changes: list[tuple[Pin, Change]],
    report: UpdateReport,
    verify: bool,
) -> None:
    state = read_state(ctx.paths)
    previous = {name: entry.generation for name, entry in state.items()}
    node_cache: dict[str, object] = {}
    contents: dict[str, dict[str, bytes | os.PathLike[str]]] = {}
    nodes: dict[str, str | None] = {}
    # PREPARE: stage and probe beside the old installs, then snapshot what may change.
    for pin, change in changes:
        target = engine.generation_dir(ctx, pin)
        if not engine.is_complete(target, pin):
            tx.add_staged(target)
        install = engine.stage(pin, ctx)
        choice = engine.choose_node(pin, ctx, manifest, node_cache)
        nodes[pin.name] = choice.path
        if choice.pin is not None and choice.pin.name not in state:
            node = choice.pin  # ivoai's Node, staged for this launcher: recorded with the update
            state[node.name] = Installed(node.version, node.digest, node.generation, "npm", now())
        contents[pin.name] = dict(engine.launcher_contents(pin, install, choice.path))
        change.probe = engine.probe_staged(pin, install, contents[pin.name], ctx)  # type: ignore[arg-type]
    targets = [
        _rel(ctx, "state", components_file(ctx.paths)),
        _rel(ctx, "state", ctx.paths.ownership_manifest),
    ]
    for pin, _ in changes:
        targets.extend(_rel(ctx, "data", bin_dir(ctx.paths) / lc.name) for lc in pin.launchers)
    pending = registry.pending(ctx.paths)
    for store, path, _version in pending:
        targets.append(_rel(ctx, store.root, path))
    tx.snapshot(targets)
    # PROMOTE
    tx.enter("PROMOTE")
    for pin, _ in changes:
        digests = engine.promote(pin, contents[pin.name], ctx)  # type: ignore[arg-type]
        state[pin.name] = Installed(
            pin.version, pin.digest, pin.generation, pin.component.kind, now(), nodes[pin.name], digests
        )
    write_state(ctx.paths, state)
    # MIGRATE
    tx.enter("MIGRATE")
    for done, (store, path, version) in enumerate(pending, 1):
        new = registry.migrate(store.name, path.read_bytes(), version, store.current)
        atomic_write(roots(ctx.paths)[store.root], path, new)
        if done == 1:
            kill_point("MIGRATE+1")
    # SETUP
    tx.enter("SETUP")
    for pin, _ in changes:
        report.warnings.extend(engine.record_ownership(pin, ctx, engine.pre_existing(pin, ctx)))
    # VERIFY
    tx.enter("VERIFY")
    if verify:
        report.verify = _verify(ctx, changes)
    keep = {name: sorted({gen, state[name].generation}) for name, gen in previous.items() if name in state}
    tx.info["after_commit_prune"] = keep
    tx.info["stores"] = {store.name: [version, store.current] for store, _p, version in pending}
    tx.commit()


def run_rollback(
    ctx: InstallContext, manifest: Manifest, *, force: bool = False, registry: Registry = DEFAULT_REGISTRY
) -> UpdateReport:
    """Undo the last committed update (see module docstring).

    Raises:
        NothingToRollBackError: no committed update is recorded.
        RollbackConflictError: files changed since the commit and `force` is not set.
        UpdateError: the rollback failed (it was itself rolled back).
    """
    with components_lock(ctx.paths):
        recovered = recover(ctx)
        last = last_update(ctx.paths)
        if last is None:
            raise NothingToRollBackError("no committed update to roll back (`ivoai update` records one)")
        conflicts = [
            str(record.path(ctx.paths))
            for record in last.files
            if sha256_or_none(record.path(ctx.paths)) != record.after
        ]
        if conflicts and not force:
            shown = ", ".join(conflicts[:5]) + (" …" if len(conflicts) > 5 else "")
            raise RollbackConflictError(
                f"{len(conflicts)} file(s) changed after the update: {shown}; "
                "`ivoai update --rollback --force` overwrites them with the pre-update copies"
            )
        for record in last.files:  # every snapshot must be intact before anything is touched
            if record.existed and sha256_or_none(last.snapshot_copy(record)) != record.before:
                raise UpdateError(
                    f"the snapshot of {record.path(ctx.paths)} is damaged; nothing was rolled back"
                )
        report = UpdateReport(
            "rolled_back", recovered=recovered, txid=last.txid, test_manifest=manifest.test_override
        )
        for item in last.info.get("components", []):
            report.components.append(
                Change(
                    item["name"],
                    item["to_version"],
                    item["from_version"],
                    item["to_generation"],
                    item["from_generation"],
                )
            )
        stores = {k: v for k, v in dict(last.info.get("stores", {})).items() if isinstance(v, list)}
        newer = _newer_files(ctx, registry, last, stores)
        tx = Transaction.begin(ctx.paths, "rollback", {"undoes": last.txid})
        try:
            tx.snapshot(
                [(r.root, r.rel) for r in last.files] + [_rel(ctx, s.root, p) for s, p, _v, _o in newer]
            )
            tx.enter("PROMOTE")
            last.restore()
            tx.enter("MIGRATE")
            for store, path, version, old in newer:
                atomic_write(
                    roots(ctx.paths)[store.root],
                    path,
                    registry.migrate(store.name, path.read_bytes(), version, old),
                )
                report.migrations.append({"store": store.name, "file": str(path), "from": version, "to": old})
            tx.enter("SETUP")
            tx.enter("VERIFY")
            state = read_state(ctx.paths)
            for change in report.components:
                entry = state.get(change.name)
                if entry is not None and entry.generation != change.to_generation:
                    raise UpdateError(
                        f"{change.name}: the restored state does not point at {change.to_generation}"
                    )
            tx.info["after_commit_prune"] = {name: [entry.generation] for name, entry in state.items()}
            tx.commit()
        except BaseException as exc:
            tx.abort()
            if isinstance(exc, IvoaiError):
                raise UpdateError(f"rollback undone at {tx.phase}: {exc.message}") from None
            raise
        return report


def _newer_files(
    ctx: InstallContext, registry: Registry, last: Transaction, stores: dict[str, list[int]]
) -> list[tuple[Store, Path, int, int]]:
    """Files of migrated stores written after the commit (not snapshotted) in the newer schema."""
    known = {str(r.path(ctx.paths)) for r in last.files}
    out: list[tuple[Store, Path, int, int]] = []
    for name, versions in stores.items():
        store, old = registry.store(name), int(versions[0])
        for path in store.files(ctx.paths):
            if str(path) in known:
                continue
            version = store.version_of(path.read_bytes())
            if version > old:
                out.append((store, path, version, old))
    return out
