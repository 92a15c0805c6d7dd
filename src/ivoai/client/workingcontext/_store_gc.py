"""ArtifactStore cleanup: expired artifacts and abandoned staging directories, nothing else.

Explicit and deterministic (name order, under the store lock; nothing runs in the background). An
expired object is removed only while its payload still matches its SHA-256; corrupt objects and
unknown entries are kept and reported, never deleted by assumption.
"""

from __future__ import annotations

import fcntl
import os

from ivoai.client.workingcontext._contracts import ArtifactRef
from ivoai.client.workingcontext._errors import ArtifactCorruptError, ArtifactNotFoundError
from ivoai.client.workingcontext._store_files import DIR_FLAGS, OBJECTS, STAGING, StoreFiles, remove_known
from ivoai.client.workingcontext._store_types import GcReport, Problem
from ivoai.common.errors import UnsafePathError


def gc(files: StoreFiles, *, dry_run: bool) -> GcReport:
    """Remove expired artifacts and abandoned staging entries; keep and report everything else."""
    report = GcReport(dry_run=dry_run)
    try:
        os.close(files.open_root(create=False))
    except FileNotFoundError:
        return report
    with files.lock():
        now = files.clock()
        expired: list[ArtifactRef] = []
        for _name, item in files.walk():
            if isinstance(item, Problem):
                report.kept.append(item)
            elif now >= item.expires_at.timestamp():
                expired.append(item)
        if expired:
            _remove_expired(files, expired, report)
        for staging_fd, name, _size in files.staging_entries():
            _gc_stage(staging_fd, name, report)
        report.kept.extend(files.root_problems())
    return report


def _remove_expired(files: StoreFiles, expired: list[ArtifactRef], report: GcReport) -> None:
    objects_fd = files.open_sub(OBJECTS, create=False)
    try:
        for ref in expired:
            problem = _integrity_problem(files, ref)
            if problem is not None:
                report.kept.append(problem)
            elif report.dry_run or _remove_dir(objects_fd, ref.id, report):
                report.removed.append(ref.id)
                report.removed_bytes += ref.size
    finally:
        os.close(objects_fd)


def _integrity_problem(files: StoreFiles, ref: ArtifactRef) -> Problem | None:
    """None when the payload still matches its SHA-256; a corrupt one is never deleted by GC."""
    try:
        with files.open_object(ref.id) as (obj_fd, current):
            fd, st = files.open_payload(obj_fd, current)
            try:
                files.verify(fd, st, current)
            finally:
                os.close(fd)
    except (ArtifactCorruptError, UnsafePathError, ArtifactNotFoundError) as exc:
        return Problem(ref.id, exc.message, exc.code)
    return None


def _remove_dir(parent_fd: int, name: str, report: GcReport) -> bool:
    try:
        dfd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    except OSError:
        return False
    try:
        unknown = remove_known(dfd)
    finally:
        os.close(dfd)
    if unknown:
        report.kept.append(Problem(name, f"unexpected files {unknown[:4]} kept", "unknown_entry"))
        return False
    os.rmdir(name, dir_fd=parent_fd)
    return True


def _gc_stage(staging_fd: int, name: str, report: GcReport) -> None:
    try:
        dfd = os.open(name, DIR_FLAGS, dir_fd=staging_fd)
    except OSError:
        report.kept.append(Problem(f"{STAGING}/{name}", "symlink or not a directory", "unknown_entry"))
        return
    try:
        try:
            fcntl.flock(dfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report.staging_in_use += 1  # a live writer holds it
            return
        if report.dry_run:
            report.staging_removed.append(name)
            return
        unknown = remove_known(dfd)
    finally:
        os.close(dfd)
    if unknown:
        report.kept.append(
            Problem(f"{STAGING}/{name}", f"unexpected files {unknown[:4]} kept", "unknown_entry")
        )
        return
    os.rmdir(name, dir_fd=staging_fd)
    report.staging_removed.append(name)
