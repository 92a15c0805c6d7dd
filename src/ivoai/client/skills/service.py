"""The skill control plane's operations: the one API behind `ivoai skills ...`, the launcher and AUTO.

Every mutation runs inside one registry transaction (lock held from staging to publication). A
source is staged into a private directory, validated as a whole, indexed (front matter only),
checked as a set against what is installed, and only then are the valid skills moved into the
content-addressed object store and the registry published. A refused source or skill leaves the
registry's active pointers exactly as they were and records the reason.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ivoai.client.skills._doctor import doctor_report
from ivoai.client.skills.archive import fetch_archive, stage_archive
from ivoai.client.skills.builtin import BUILTINS, all_builtins
from ivoai.client.skills.gitsource import check_commit, check_git_url, stage_git
from ivoai.client.skills.index import IndexEntry, Quarantine, check_set, index_directory
from ivoai.client.skills.model import (
    BUILTIN_PREFIX,
    Lifecycle,
    Risk,
    SkillError,
    SkillMeta,
    StagingRefused,
    UserPolicy,
)
from ivoai.client.skills.policy import PolicyResult, evaluate
from ivoai.client.skills.registry import Registry, SkillRecord, SkillStore, Source, Version
from ivoai.client.skills.resolver import Candidate, Catalog, Request, resolve
from ivoai.client.skills.sources import make_source
from ivoai.client.skills.tree import TreeFacts, TreeWriter, copy_local, tree_facts
from ivoai.common.errors import NotFoundError, UsageError
from ivoai.common.paths import XdgPaths
from ivoai.core.health import Health, HealthState
from ivoai.core.skills import SkillRef

__all__ = ["APPROVALS_KEPT", "InstalledSkills", "SkillService", "component_statuses", "make_source"]

APPROVALS_KEPT = 8  # approved digests remembered per skill


class SkillService:
    """Registry operations; reads never lock or create anything, writes hold the registry lock."""

    def __init__(self, paths: XdgPaths | None = None) -> None:
        self.store = SkillStore(paths)

    # --- reading ---------------------------------------------------------------------------------

    def candidates(self, registry: Registry | None = None) -> list[Candidate]:
        """Every active, enabled skill (built-in ones included) with its policy decision."""
        registry = registry if registry is not None else self.store.load()
        out: list[Candidate] = []
        for skill in all_builtins():
            if skill.meta.name in registry.builtin_disabled:
                continue
            decision = evaluate(skill.meta, digest=skill.facts.digest, user=UserPolicy(builtin=True))
            out.append(Candidate(skill.meta, skill.facts.digest, skill.directory, decision, "builtin"))
        for record in registry.skills.values():
            active = record.active
            if not record.enabled or active is None or active.meta is None or active.digest is None:
                continue
            out.append(
                Candidate(
                    active.meta,
                    active.digest,
                    str(self.store.object_dir(active.digest)),
                    self._policy(record, active),
                    record.source.kind,
                )
            )
        return out

    def catalog(self, registry: Registry | None = None) -> Catalog:
        return Catalog.build(self.candidates(registry))

    def _policy(self, record: SkillRecord, version: Version) -> PolicyResult:
        assert version.meta is not None
        user = UserPolicy(risk=record.user_risk, approved_digests=frozenset(record.approvals))
        return evaluate(version.meta, digest=version.digest, scripts=version.scripts, user=user)

    def list_skills(self) -> list[dict[str, Any]]:
        """One row per skill (built-in first), with its state, policy decision and reason."""
        registry = self.store.load()
        rows = []
        for skill in all_builtins():
            decision = evaluate(skill.meta, digest=skill.facts.digest, user=UserPolicy(builtin=True))
            rows.append(
                {
                    "name": skill.meta.name,
                    "source": "builtin",
                    "state": Lifecycle.ACTIVE.value,
                    "enabled": skill.meta.name not in registry.builtin_disabled,
                    "pinned": False,
                    "version": skill.meta.version,
                    "digest": skill.facts.digest,
                    "decision": decision.decision.value,
                    "risk": decision.risk.name if decision.risk is not None else None,
                    "reason": decision.reasons[-1],
                }
            )
        for name in sorted(registry.skills):
            rows.append(self._row(registry.skills[name]))
        return rows

    def _row(self, record: SkillRecord) -> dict[str, Any]:
        active = record.active
        shown = (
            active
            or record.version_in(Lifecycle.STAGED)
            or (record.versions[-1] if record.versions else None)
        )
        row: dict[str, Any] = {
            "name": record.name,
            "source": record.source.kind,
            "state": shown.state.value if shown else None,
            "enabled": record.enabled,
            "pinned": record.pinned,
            "version": shown.meta.version if shown and shown.meta else None,
            "digest": shown.digest if shown else None,
            "decision": None,
            "risk": None,
            "reason": shown.reason if shown else None,
        }
        if shown is not None and shown.meta is not None:
            result = self._policy(record, shown)
            row.update(
                decision=result.decision.value,
                risk=result.risk.name if result.risk is not None else None,
                reason=result.reasons[-1] if result.decision.value != "ALLOW" else None,
            )
        return row

    def show(self, name: str) -> dict[str, Any]:
        """Everything about one skill: source, flags, versions with their policy and reasons.

        Raises:
            NotFoundError: no such skill.
        """
        registry = self.store.load()
        if name in BUILTINS:
            skill = next(s for s in all_builtins() if s.meta.name == name)
            decision = evaluate(skill.meta, digest=skill.facts.digest, user=UserPolicy(builtin=True))
            return {
                "schema": 1,
                "name": name,
                "source": {"kind": "builtin", "location": skill.directory},
                "enabled": name not in registry.builtin_disabled,
                "pinned": False,
                "versions": [
                    {
                        "state": "active",
                        "digest": skill.facts.digest,
                        "meta": skill.meta.to_json(),
                        "files": skill.facts.files,
                        "bytes": skill.facts.bytes,
                        "policy": decision.to_json(),
                        "directory": skill.directory,
                    }
                ],
            }
        record = self._record(registry, name)
        versions = []
        order = [Lifecycle.ACTIVE, Lifecycle.PREVIOUS, Lifecycle.STAGED, Lifecycle.QUARANTINED]
        newest_first = list(reversed(record.versions))
        # sorted() is stable: within one state the newest record comes first
        for version in sorted(newest_first, key=lambda v: order.index(v.state)):
            item = version.to_json()
            if version.meta is not None:
                item["policy"] = self._policy(record, version).to_json()
            if version.digest is not None:
                item["directory"] = str(self.store.object_dir(version.digest))
            versions.append(item)
        return {
            "schema": 1,
            "name": name,
            "source": record.source.to_json(),
            "enabled": record.enabled,
            "pinned": record.pinned,
            "risk": record.risk,
            "approvals": list(record.approvals),
            "versions": versions,
        }

    def _record(self, registry: Registry, name: str) -> SkillRecord:
        record = registry.skills.get(name)
        if record is None:
            known = ", ".join(sorted([*BUILTINS, *registry.skills])) or "none"
            raise NotFoundError(f"no skill named {name!r} (known: {known})")
        return record

    def resolve(self, request: Request) -> Any:
        return resolve(self.catalog(), request)

    # --- staging ---------------------------------------------------------------------------------

    def _stage(self, source: Source, staging: Path) -> tuple[Path, TreeWriter]:
        tree = staging / "tree"
        os.mkdir(tree, 0o700)
        writer = TreeWriter(str(tree))
        try:
            if source.kind == "dir":
                copy_local(source.location, writer, source.subdir)
            elif source.kind == "git":
                assert source.commit is not None
                stage_git(source.location, source.commit, str(staging), writer, source.subdir)
            else:
                assert source.sha256 is not None
                archive = str(staging / "archive")
                fetch_archive(source.location, source.sha256, archive)
                stage_archive(archive, writer, source.subdir)
        finally:
            writer.close()
        return tree, writer

    def _installed(self, registry: Registry, *, excluding: set[str]) -> dict[str, SkillMeta]:
        metas = {s.meta.name: s.meta for s in all_builtins()}
        for name, record in registry.skills.items():
            active = record.active
            if name not in excluding and active is not None and active.meta is not None:
                metas[name] = active.meta
        return metas

    def _store_object(self, tree: Path, rel: str, facts: TreeFacts) -> None:
        target = self.store.object_dir(facts.digest)
        source = tree / rel if rel else tree
        if target.exists():
            if tree_facts(str(target)).digest == facts.digest:
                return  # the same tree is already stored (objects are content-addressed)
            shutil.rmtree(target)  # a damaged copy: replace it
        os.makedirs(self.store.objects, mode=0o700, exist_ok=True)
        os.rename(source, target)

    def _version(self, state: Lifecycle, meta: SkillMeta, facts: TreeFacts, source: Source) -> Version:
        return Version(
            state=state,
            digest=facts.digest,
            meta=meta,
            at=time.time(),
            commit=source.commit,
            archive_sha256=source.sha256,
            files=facts.files,
            bytes=facts.bytes,
            scripts=facts.scripts,
        )

    def add(self, source: Source, *, stage_only: bool = False) -> dict[str, Any]:
        """Stage `source`, store its valid skills (active unless `stage_only`), quarantine the rest.

        Raises:
            StagingRefused: the source as a whole was refused (recorded in the registry first).
        """
        added: list[dict[str, Any]] = []
        quarantined: list[Quarantine] = []
        refused: StagingRefused | None = None
        with self.store.transaction() as registry:
            staging = self.store.new_staging()
            try:
                try:
                    tree, _ = self._stage(source, staging)
                except StagingRefused as exc:
                    registry.record_refusal(source, exc.message, time.time())
                    refused = exc
                else:
                    result = index_directory(tree)
                    quarantined.extend(result.quarantined)
                    entries = self._admissible(registry, result.entries, quarantined)
                    good, bad = check_set(
                        entries, self._installed(registry, excluding={e.meta.name for e in entries})
                    )
                    quarantined.extend(bad)
                    state = Lifecycle.STAGED if stage_only else Lifecycle.ACTIVE
                    for entry in good:
                        added.append(self._add_one(registry, tree, entry, source, state))
                    for item in quarantined:
                        self._record_quarantine(registry, source, item)
                    if not good and not quarantined:
                        refused = StagingRefused("no SKILL.md was found in the source")
                        registry.record_refusal(source, refused.message, time.time())
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        if refused is not None:
            raise refused
        return {
            "schema": 1,
            "source": source.to_json(),
            "added": added,
            "quarantined": [q.to_json() for q in quarantined],
            "ok": bool(added) and not quarantined,
        }

    def _admissible(
        self, registry: Registry, entries: list[IndexEntry], out: list[Quarantine]
    ) -> list[IndexEntry]:
        keep = []
        for entry in entries:
            name = entry.meta.name
            record = registry.skills.get(name)
            if name.startswith(BUILTIN_PREFIX) or name in BUILTINS:
                out.append(
                    Quarantine(
                        entry.rel,
                        name,
                        f"the name prefix `{BUILTIN_PREFIX}` is reserved for ivoai's own skills",
                    )
                )
            elif record is not None and (record.active or record.version_in(Lifecycle.STAGED)):
                out.append(
                    Quarantine(
                        entry.rel,
                        name,
                        f"`{name}` is already installed from {record.source.describe()}; "
                        f"use `ivoai skills update {name}` or remove it first",
                    )
                )
            else:
                keep.append(entry)
        return keep

    def _add_one(
        self, registry: Registry, tree: Path, entry: IndexEntry, source: Source, state: Lifecycle
    ) -> dict[str, Any]:
        facts = tree_facts(str(tree / entry.rel if entry.rel else tree))
        self._store_object(tree, entry.rel, facts)
        skill_source = replace(source, subpath=entry.rel)
        record = registry.skills.get(entry.meta.name)
        if record is None:
            record = registry.skills[entry.meta.name] = SkillRecord(entry.meta.name, skill_source)
        record.source = skill_source
        record.enabled = True
        version = self._version(state, entry.meta, facts, skill_source)
        record.add_version(version)
        return {
            "name": entry.meta.name,
            "path": entry.rel or ".",
            "state": state.value,
            "version": entry.meta.version,
            "digest": facts.digest,
            "files": facts.files,
            "bytes": facts.bytes,
            "policy": self._policy(record, version).to_json(),
        }

    def _record_quarantine(self, registry: Registry, source: Source, item: Quarantine) -> None:
        if item.name is None:
            registry.record_refusal(replace(source, subpath=item.rel), item.reason, time.time())
            return
        record = registry.skills.get(item.name)
        if record is None:
            record = registry.skills[item.name] = SkillRecord(item.name, replace(source, subpath=item.rel))
            record.enabled = False
        record.add_version(Version(Lifecycle.QUARANTINED, None, None, time.time(), reason=item.reason))

    def update(
        self, name: str, *, commit: str | None = None, sha256: str | None = None, location: str | None = None
    ) -> dict[str, Any]:
        """Stage a new version of `name` from its source; activate it only if it is valid.

        Raises:
            NotFoundError / UsageError / SkillError: unknown, pinned, or missing pins.
            StagingRefused: the new version was refused (recorded; the active version is unchanged).
        """
        if name in BUILTINS:
            raise SkillError(f"{name} is built in: it changes with the installed ivoai version")
        outcome: dict[str, Any] = {}
        refused: SkillError | None = None
        with self.store.transaction() as registry:
            record = self._record(registry, name)
            if record.pinned:
                active = record.active
                pin = active.digest if active and active.digest else "its version"
                raise SkillError(f"{name} is pinned at {pin}; run `ivoai skills unpin {name}` first")
            source = self._next_source(record.source, commit=commit, sha256=sha256, location=location)
            staging = self.store.new_staging()
            try:
                try:
                    tree, _ = self._stage(source, staging)
                    outcome = self._update_from(registry, record, tree, source)
                except StagingRefused as exc:
                    record.add_version(
                        Version(Lifecycle.QUARANTINED, None, None, time.time(), reason=exc.message)
                    )
                    refused = exc
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        if refused is not None:
            raise refused
        return outcome

    def _next_source(
        self, old: Source, *, commit: str | None, sha256: str | None, location: str | None
    ) -> Source:
        if old.kind == "git":
            if not commit:
                raise UsageError("a git source is pinned: pass --commit FULL_ID for the version to update to")
            if sha256:
                raise UsageError("--sha256 is for archives; a git source is pinned by --commit")
            where = location or old.location
            if location and os.path.exists(location):
                where = os.path.abspath(location)
            return replace(old, location=check_git_url(where), commit=check_commit(commit))
        if old.kind == "archive":
            if not sha256:
                raise UsageError(
                    "an archive source is pinned: pass --sha256 HEX (and --source URL if it moved)"
                )
            if commit:
                raise UsageError("--commit is for git sources; an archive is pinned by --sha256")
            new = make_source(location or old.location, kind="archive", sha256=sha256, subdir=old.subdir)
            return replace(old, location=new.location, sha256=new.sha256)
        if commit or sha256:
            raise UsageError("a local directory has no --commit or --sha256; update re-reads it")
        return replace(old, location=os.path.abspath(location) if location else old.location)

    def _update_from(
        self, registry: Registry, record: SkillRecord, tree: Path, source: Source
    ) -> dict[str, Any]:
        name = record.name
        result = index_directory(tree)
        entry = next(
            (e for e in result.entries if e.meta.name == name and e.rel == record.source.subpath), None
        )
        entry = entry or next((e for e in result.entries if e.meta.name == name), None)
        if entry is None:
            why = next(
                (q.reason for q in result.quarantined if q.name == name or q.rel == record.source.subpath),
                f"the source no longer has a skill named {name}",
            )
            raise StagingRefused(why)
        _, bad = check_set([entry], self._installed(registry, excluding={name}))
        if bad:
            raise StagingRefused(bad[0].reason)
        facts = tree_facts(str(tree / entry.rel if entry.rel else tree))
        active = record.active
        record.source = replace(source, subpath=entry.rel)
        if active is not None and active.digest == facts.digest:
            active.commit, active.archive_sha256 = source.commit, source.sha256
            return {"schema": 1, "name": name, "changed": False, "digest": facts.digest, "previous": None}
        self._store_object(tree, entry.rel, facts)
        record.versions = [
            v for v in record.versions if v.state is not Lifecycle.PREVIOUS
        ]  # one previous kept
        if active is not None:
            active.state = Lifecycle.PREVIOUS
        version = self._version(Lifecycle.ACTIVE, entry.meta, facts, source)
        record.add_version(version)
        return {
            "schema": 1,
            "name": name,
            "changed": True,
            "version": entry.meta.version,
            "digest": facts.digest,
            "previous": active.digest if active is not None else None,
            "policy": self._policy(record, version).to_json(),
        }

    # --- lifecycle -------------------------------------------------------------------------------

    def rollback(self, name: str) -> dict[str, Any]:
        """Make the previous version active again (its stored tree is verified first).

        Raises:
            SkillError: no previous version, or its stored tree no longer matches its digest.
        """
        if name in BUILTINS:
            raise SkillError(f"{name} is built in: it has no previous version")
        with self.store.transaction() as registry:
            record = self._record(registry, name)
            previous = record.version_in(Lifecycle.PREVIOUS)
            active = record.active
            if previous is None or previous.digest is None:
                raise SkillError(f"{name} has no previous version to roll back to")
            found = self.verify_object(previous.digest)
            if found != previous.digest:
                raise SkillError(
                    f"the stored previous version of {name} does not match its digest ({found}); "
                    "nothing changed"
                )
            previous.state = Lifecycle.ACTIVE
            if active is not None:
                active.state = Lifecycle.PREVIOUS
            record.source = replace(record.source, commit=previous.commit, sha256=previous.archive_sha256)
        return {
            "schema": 1,
            "name": name,
            "digest": previous.digest,
            "version": previous.meta.version if previous.meta else None,
            "previous": active.digest if active else None,
        }

    def verify_object(self, digest: str) -> str:
        """The digest of the tree stored under `digest`, recomputed from disk ("missing"/"unreadable: …")."""
        path = self.store.object_dir(digest)
        if not path.is_dir():
            return "missing"
        try:
            return tree_facts(str(path)).digest
        except (StagingRefused, OSError) as exc:
            return f"unreadable: {getattr(exc, 'message', exc)}"

    def enable(self, name: str, *, approve: bool = False, risk: str | None = None) -> dict[str, Any]:
        """Enable a skill, activating its newest staged version if none is active; optionally approve/rate it.

        Raises:
            NotFoundError / SkillError / UsageError.
        """
        with self.store.transaction() as registry:
            if name in BUILTINS:
                if approve or risk:
                    raise UsageError(
                        "built-in skills carry ivoai's own policy; --approve and --risk do not apply"
                    )
                registry.builtin_disabled = [n for n in registry.builtin_disabled if n != name]
                return {"schema": 1, "name": name, "enabled": True}
            record = self._record(registry, name)
            active = record.active
            if active is None:
                staged = record.version_in(Lifecycle.STAGED)
                if staged is None:
                    last = record.versions[-1].reason if record.versions else None
                    raise SkillError(
                        f"{name} has no usable version" + (f" (quarantined: {last})" if last else "")
                    )
                staged.state = Lifecycle.ACTIVE
                active = staged
            record.enabled = True
            if risk is not None:
                try:
                    record.risk = Risk.parse(risk).name
                except ValueError as exc:
                    raise UsageError(f"--risk: {exc}") from None
            if approve:
                assert active.digest is not None
                record.approvals = [a for a in record.approvals if a != active.digest][
                    -(APPROVALS_KEPT - 1) :
                ]
                record.approvals.append(active.digest)
            decision = self._policy(record, active)
        return {
            "schema": 1,
            "name": name,
            "enabled": True,
            "digest": active.digest,
            "policy": decision.to_json(),
        }

    def disable(self, name: str) -> dict[str, Any]:
        with self.store.transaction() as registry:
            if name in BUILTINS:
                if name not in registry.builtin_disabled:
                    registry.builtin_disabled.append(name)
            else:
                self._record(registry, name).enabled = False
        return {"schema": 1, "name": name, "enabled": False}

    def pin(self, name: str, pinned: bool = True) -> dict[str, Any]:
        if name in BUILTINS:
            raise SkillError(f"{name} is built in: it follows the installed ivoai version")
        with self.store.transaction() as registry:
            record = self._record(registry, name)
            active = record.active
            if pinned and active is None:
                raise SkillError(f"{name} has no active version to pin")
            record.pinned = pinned
        return {"schema": 1, "name": name, "pinned": pinned, "digest": active.digest if active else None}

    def remove(self, name: str) -> dict[str, Any]:
        if name in BUILTINS:
            raise SkillError(
                f"{name} is built in and cannot be removed; `ivoai skills disable {name}` turns it off"
            )
        with self.store.transaction() as registry:
            record = self._record(registry, name)
            del registry.skills[name]
        stored = sum(1 for v in record.versions if v.digest is not None)
        return {"schema": 1, "name": name, "removed": True, "versions_removed": stored}

    # --- doctor ----------------------------------------------------------------------------------

    def doctor(self) -> dict[str, Any]:
        """Read-only checks: directory modes, registry, every stored tree against its digest, resolution."""
        return doctor_report(self)


class InstalledSkills:
    """`ivoai.core.skills.SkillRegistry` over the registry: active, enabled skills (built-in ones too)."""

    def __init__(self, service: SkillService | None = None) -> None:
        self.service = service or SkillService()

    def probe(self) -> Health:
        report = self.service.doctor()
        if not report["ok"]:
            return Health(HealthState.UNHEALTHY, "; ".join(report["problems"]))
        if report["warnings"]:
            return Health(HealthState.DEGRADED, f"{len(report['warnings'])} warning(s): ivoai skills doctor")
        return Health(HealthState.HEALTHY, f"{len(report['skills'])} active skill(s)")

    def skills(self) -> Sequence[SkillRef]:
        return [
            SkillRef(c.name, c.meta.description, c.meta.version, c.digest) for c in self.service.candidates()
        ]

    def get(self, name: str) -> SkillRef | None:
        return next((s for s in self.skills() if s.name == name), None)


def component_statuses(paths: XdgPaths) -> list[Any]:
    """`ivoai doctor`'s row for the skill control plane (registered in `client.doctor.PROVIDERS`).

    Read-only, like doctor: a missing registry is a healthy empty one (built-in skills only).
    """
    from ivoai.core import ComponentStatus, Fact, Provenance, Source

    installed = InstalledSkills(SkillService(paths))
    health = installed.probe()
    try:
        count = len(installed.skills())
        available = Fact.YES
    except (SkillError, OSError):
        count, available = 0, Fact.NO
    return [
        ComponentStatus(
            "skills",
            "skill_registry",
            "SkillStore",
            installed=Fact.YES,
            available=available,
            health=health,
            provenance=Provenance(Source.PROBE, "ivoai skills doctor"),
            active=Fact.YES if count else Fact.NO,
            reason=f"{count} active, enabled skill(s); attached only with --skill or to AUTO workers by role",
        )
    ]
