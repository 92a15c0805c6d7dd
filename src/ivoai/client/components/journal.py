"""The update journal: phases, private exact-file snapshots, abort, commit and crash recovery.

An update (or a rollback) is one transaction with the phases

    PREPARE -> PROMOTE -> MIGRATE -> SETUP -> VERIFY -> COMMIT

recorded in `$XDG_STATE_HOME/ivoai/update/journal.json` (atomic, fsynced) *before* each phase does
anything. PREPARE stages new installs beside the old ones and copies every file the transaction may
change (launchers, components.json, ownership.json, the files of each schema it migrates) into
`update/tx-<id>/files/` with its mode and SHA-256; nothing live changes before that snapshot is
durable. COMMIT records each file's new SHA-256 and moves the journal to `update/last.json`, which
is what `ivoai update --rollback` works from.

Recovery (`recover`, run first by setup, update, rollback and uninstall): a journal left in any
phase before COMMIT is rolled back (snapshots restored byte for byte, files the transaction created
removed, staged installs deleted); a journal at COMMIT is finished. So a SIGKILL at any point
leaves either the old state or the new one.

Test hook: `IVOAI_TEST_UPDATE_KILL_AT=PHASE` (or `MIGRATE+1`, after the first migrated file) makes
the process SIGKILL itself right after that phase is journaled; the tests use it to prove recovery.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import signal
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ivoai.client.components.errors import ComponentError
from ivoai.client.components.state import json_object, now
from ivoai.common.fsio import atomic_write, ensure_private_dir, read_private_file_or_none
from ivoai.common.jsonio import dumps_bytes
from ivoai.common.limits import COMPONENT_STATE_MAX_BYTES, UPDATE_SNAPSHOT_MAX_BYTES
from ivoai.common.paths import XdgPaths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ivoai.client.components.installers import InstallContext

PHASES = ("PREPARE", "PROMOTE", "MIGRATE", "SETUP", "VERIFY", "COMMIT")
KILL_ENV = "IVOAI_TEST_UPDATE_KILL_AT"
JOURNAL_SCHEMA = 1


def update_dir(paths: XdgPaths) -> Path:
    return paths.state / "update"


def journal_path(paths: XdgPaths) -> Path:
    return update_dir(paths) / "journal.json"


def last_path(paths: XdgPaths) -> Path:
    return update_dir(paths) / "last.json"


def roots(paths: XdgPaths) -> dict[str, Path]:
    return {"config": paths.config, "data": paths.data, "state": paths.state}


def sha256_or_none(path: Path) -> str | None:
    """SHA-256 of a regular file (not followed if a symlink), or None when it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ComponentError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        digest = hashlib.sha256()
        while block := os.read(fd, 1 << 20):
            digest.update(block)
        return digest.hexdigest()
    finally:
        os.close(fd)


@dataclass
class FileRecord:
    """One snapshotted file: where it lives, whether it existed, and its digest before and after."""

    root: str
    rel: str
    existed: bool
    mode: int | None
    before: str | None
    index: int
    after: str | None = None

    def path(self, paths: XdgPaths) -> Path:
        return roots(paths)[self.root] / self.rel


@dataclass
class Transaction:
    """An open update or rollback; every mutation of its record is journaled first."""

    paths: XdgPaths
    txid: str
    kind: str  # update | rollback
    phase: str = "PREPARE"
    files: list[FileRecord] = field(default_factory=list)
    staged: list[str] = field(default_factory=list)  # install directories this transaction created
    info: dict[str, Any] = field(default_factory=dict)
    started_at: str = field(default_factory=now)

    @property
    def dir(self) -> Path:
        return update_dir(self.paths) / f"tx-{self.txid}"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": JOURNAL_SCHEMA,
            "txid": self.txid,
            "kind": self.kind,
            "phase": self.phase,
            "started_at": self.started_at,
            "files": [asdict(f) for f in self.files],
            "staged": self.staged,
            "info": self.info,
        }

    @classmethod
    def from_json(cls, paths: XdgPaths, doc: dict[str, Any]) -> Transaction:
        try:
            return cls(
                paths=paths,
                txid=str(doc["txid"]),
                kind=str(doc["kind"]),
                phase=str(doc["phase"]),
                files=[FileRecord(**f) for f in doc.get("files", [])],
                staged=[str(s) for s in doc.get("staged", [])],
                info=dict(doc.get("info", {})),
                started_at=str(doc.get("started_at", "")),
            )
        except (KeyError, TypeError, ValueError):
            raise ComponentError(f"{journal_path(paths)} is malformed; inspect it, then remove it") from None

    def _save(self) -> None:
        atomic_write(self.paths.state, journal_path(self.paths), dumps_bytes(self.to_json()))

    @classmethod
    def begin(cls, paths: XdgPaths, kind: str, info: dict[str, Any]) -> Transaction:
        """Open a transaction (PREPARE is journaled before this returns)."""
        ensure_private_dir(paths.state, update_dir(paths))
        tx = cls(paths, secrets.token_hex(8), kind, info=info)
        ensure_private_dir(paths.state, tx.dir)
        tx._save()
        kill_point("PREPARE")
        return tx

    def enter(self, phase: str) -> None:
        """Journal `phase` (durably) before any of its work starts."""
        assert phase in PHASES
        self.phase = phase
        self._save()
        kill_point(phase)

    def add_staged(self, path: Path) -> None:
        """Journal an install directory before it is created, so recovery can remove it."""
        if str(path) not in self.staged:
            self.staged.append(str(path))
            self._save()

    def snapshot(self, targets: list[tuple[str, str]]) -> None:
        """Copy each (root, relative path) privately with mode and digest, then journal the index.

        Raises:
            ComponentError: the files exceed UPDATE_SNAPSHOT_MAX_BYTES together.
        """
        files_dir = ensure_private_dir(self.paths.state, self.dir / "files")
        known = {(f.root, f.rel) for f in self.files}
        total = 0
        for root, rel in targets:
            if (root, rel) in known:
                continue
            known.add((root, rel))
            path = roots(self.paths)[root] / rel
            index = len(self.files)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                self.files.append(FileRecord(root, rel, False, None, None, index))
                continue
            if not os.path.isfile(path) or os.path.islink(path):
                raise ComponentError(f"{path} is not a regular file; refusing to snapshot it")
            total += st.st_size
            if total > UPDATE_SNAPSHOT_MAX_BYTES:
                raise ComponentError(f"the files to snapshot exceed {UPDATE_SNAPSHOT_MAX_BYTES} bytes")
            copy = files_dir / str(index)
            atomic_write(self.paths.state, copy, path, mode=0o600)
            digest = sha256_or_none(copy)
            self.files.append(FileRecord(root, rel, True, st.st_mode & 0o7777, digest, index))
        self._save()

    def snapshot_copy(self, record: FileRecord) -> Path:
        return self.dir / "files" / str(record.index)

    def restore(self, records: list[FileRecord] | None = None) -> None:
        """Put every snapshotted file back byte for byte (or remove it if it did not exist)."""
        for record in records if records is not None else self.files:
            target = record.path(self.paths)
            root = roots(self.paths)[record.root]
            if record.existed:
                copy = self.snapshot_copy(record)
                if sha256_or_none(target) == record.before:
                    continue
                if sha256_or_none(copy) != record.before:
                    raise ComponentError(f"the snapshot of {target} is damaged; it was not restored")
                atomic_write(root, target, copy, mode=record.mode or 0o600)
            else:
                with contextlib.suppress(FileNotFoundError):
                    if os.path.isdir(target) and not os.path.islink(target):
                        shutil.rmtree(target)
                    else:
                        os.unlink(target)

    def abort(self) -> None:
        """Roll back an uncommitted transaction: files restored, staged installs removed, journal gone."""
        self.restore()
        for staged in self.staged:
            shutil.rmtree(staged, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(journal_path(self.paths))

    def commit(self) -> None:
        """Record each file's new digest, journal COMMIT, then publish `last.json` and clean up."""
        for record in self.files:
            record.after = sha256_or_none(record.path(self.paths))
        self.enter("COMMIT")
        finish_commit(self)


def finish_commit(tx: Transaction) -> None:
    """The idempotent tail of a commit (also run by recovery when a COMMIT journal is found)."""
    paths = tx.paths
    if tx.kind == "update":
        atomic_write(paths.state, last_path(paths), dumps_bytes({**tx.to_json(), "committed_at": now()}))
        keep = {f"tx-{tx.txid}"}
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(last_path(paths))
        keep = set()
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(update_dir(paths)):
            if entry.name.startswith("tx-") and entry.name not in keep:
                shutil.rmtree(entry.path, ignore_errors=True)
    cleanup = tx.info.get("after_commit_prune")
    if isinstance(cleanup, dict):
        from ivoai.client.components.state import components_dir

        for name, generations in cleanup.items():
            base = components_dir(paths) / str(name)
            with contextlib.suppress(FileNotFoundError):
                for entry in os.scandir(base):
                    stale = entry.name not in set(generations) and not entry.name.startswith(".")
                    if stale and entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(journal_path(paths))


def read_json(paths: XdgPaths, path: Path) -> dict[str, Any] | None:
    raw = read_private_file_or_none(paths.state, path, COMPONENT_STATE_MAX_BYTES)
    if raw is None:
        return None
    return json_object(raw, path, ComponentError, f"{path} is not valid JSON; inspect it, then remove it")


def open_journal(paths: XdgPaths) -> Transaction | None:
    doc = read_json(paths, journal_path(paths))
    return None if doc is None else Transaction.from_json(paths, doc)


def last_update(paths: XdgPaths) -> Transaction | None:
    doc = read_json(paths, last_path(paths))
    return None if doc is None else Transaction.from_json(paths, doc)


def recover(ctx: InstallContext) -> dict[str, Any] | None:
    """Finish or roll back a transaction a crash left open (caller holds the components lock)."""
    tx = open_journal(ctx.paths)
    if tx is None:
        return None
    if tx.phase == "COMMIT":
        finish_commit(tx)
        action = "completed"
    else:
        tx.abort()
        action = "rolled_back"
    ctx.progress(f"recovered an interrupted {tx.kind} (phase {tx.phase}): {action.replace('_', ' ')}")
    return {"txid": tx.txid, "kind": tx.kind, "phase": tx.phase, "action": action}


def kill_point(phase: str) -> None:
    """Test hook: SIGKILL this process at `phase` when IVOAI_TEST_UPDATE_KILL_AT names it."""
    if os.environ.get(KILL_ENV) == phase:
        os.kill(os.getpid(), signal.SIGKILL)
