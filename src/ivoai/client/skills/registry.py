"""`$XDG_STATE_HOME/ivoai/skills/registry.json`: skills, their sources and versions, under a lock.

Layout (every directory 0700, every file 0600, no link anywhere; see `common.fsio`):

    skills/registry.json         schema 1: skills -> source, flags, versions (the active pointer)
    skills/.registry.json.lock   flock serializing writers
    skills/objects/<hex>/        one stored skill tree per SHA-256 tree digest, never modified
    skills/staging/<random>/     a source being staged (removed afterwards, or by the next writer)

The active version of a skill is the version record whose state is `active`; it changes only when
registry.json is replaced atomically, after its object is complete, so a crash leaves the previous
state (and at most an unreferenced object, removed by the next writer). A missing registry is a
healthy empty one: reading never creates anything.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ivoai.client.skills.model import Lifecycle, Risk, SkillError, SkillMeta
from ivoai.common.errors import ValidationError
from ivoai.common.fsio import (
    atomic_write,
    ensure_private_dir,
    file_lock,
    open_private_dir,
    read_private_file_or_none,
    remove_stale_staging,
)
from ivoai.common.limits import (
    JSON_STATE_MAX_BYTES,
    SKILL_QUARANTINE_RECORDS_KEPT,
    SKILL_VERSIONS_KEPT,
    SKILLS_REGISTRY_MAX_SKILLS,
)
from ivoai.common.paths import XdgPaths, xdg_paths

SCHEMA = 1
SOURCE_KINDS = ("dir", "git", "archive")


@dataclass
class Source:
    """Where a skill came from; `subpath` is the skill's directory inside the source ("" = its root)."""

    kind: str
    location: str
    subpath: str = ""
    subdir: str | None = None  # the `--path` the source was restricted to
    commit: str | None = None
    sha256: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "location": self.location,
            "subpath": self.subpath,
            "subdir": self.subdir,
            "commit": self.commit,
            "sha256": self.sha256,
        }

    @classmethod
    def from_json(cls, doc: Any) -> Source:
        if not isinstance(doc, dict) or doc.get("kind") not in SOURCE_KINDS:
            raise SkillError("registry: a skill has an invalid `source`")
        return cls(
            kind=doc["kind"],
            location=_text(doc, "location"),
            subpath=_text(doc, "subpath", default=""),
            subdir=_opt(doc, "subdir"),
            commit=_opt(doc, "commit"),
            sha256=_opt(doc, "sha256"),
        )

    def describe(self) -> str:
        where = self.location + (f" ({self.subpath})" if self.subpath else "")
        pin = (
            f" @ {self.commit[:12]}" if self.commit else f" sha256:{self.sha256[:12]}" if self.sha256 else ""
        )
        return f"{self.kind} {where}{pin}"


@dataclass
class Version:
    """One stored (or refused) version of a skill."""

    state: Lifecycle
    digest: str | None  # `sha256:<hex>` of the stored tree; None for a quarantined attempt
    meta: SkillMeta | None
    at: float
    commit: str | None = None
    archive_sha256: str | None = None
    files: int = 0
    bytes: int = 0
    scripts: tuple[str, ...] = ()
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "digest": self.digest,
            "meta": self.meta.to_json() if self.meta is not None else None,
            "at": self.at,
            "commit": self.commit,
            "archive_sha256": self.archive_sha256,
            "files": self.files,
            "bytes": self.bytes,
            "scripts": list(self.scripts),
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, doc: Any) -> Version:
        if not isinstance(doc, dict):
            raise SkillError("registry: a version is not an object")
        try:
            state = Lifecycle(str(doc.get("state")))
        except ValueError:
            raise SkillError(f"registry: unknown version state {doc.get('state')!r}") from None
        meta = doc.get("meta")
        scripts = doc.get("scripts", [])
        if not isinstance(scripts, list) or not all(isinstance(s, str) for s in scripts):
            raise SkillError("registry: `scripts` is not a list of strings")
        at = doc.get("at", 0)
        files = doc.get("files", 0)
        size = doc.get("bytes", 0)
        if not all(isinstance(n, int | float) for n in (at, files, size)):
            raise SkillError("registry: a version has a non-numeric field")
        version = cls(
            state=state,
            digest=_opt(doc, "digest"),
            meta=SkillMeta.from_json(meta) if isinstance(meta, dict) else None,
            at=float(at),
            commit=_opt(doc, "commit"),
            archive_sha256=_opt(doc, "archive_sha256"),
            files=int(files),
            bytes=int(size),
            scripts=tuple(scripts),
            reason=_opt(doc, "reason"),
        )
        if state is not Lifecycle.QUARANTINED and (version.digest is None or version.meta is None):
            raise SkillError(f"registry: a {state.value} version has no digest or metadata")
        return version


@dataclass
class SkillRecord:
    """One skill: its source, the user's decisions about it, and its versions (newest last)."""

    name: str
    source: Source
    enabled: bool = True
    pinned: bool = False
    approvals: list[str] = field(default_factory=list)  # digests the user approved (REQUIRE_APPROVAL)
    risk: str | None = None  # the user's own risk level for it
    versions: list[Version] = field(default_factory=list)

    def version_in(self, state: Lifecycle) -> Version | None:
        for version in reversed(self.versions):
            if version.state is state:
                return version
        return None

    @property
    def active(self) -> Version | None:
        return self.version_in(Lifecycle.ACTIVE)

    @property
    def user_risk(self) -> Risk | None:
        return Risk[self.risk] if self.risk else None

    def add_version(self, version: Version) -> None:
        """Append, keeping at most `SKILL_VERSIONS_KEPT` records (active and previous are never dropped)."""
        self.versions.append(version)
        while len(self.versions) > SKILL_VERSIONS_KEPT:
            for i, old in enumerate(self.versions):
                if old.state not in (Lifecycle.ACTIVE, Lifecycle.PREVIOUS):
                    del self.versions[i]
                    break
            else:
                break

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source.to_json(),
            "enabled": self.enabled,
            "pinned": self.pinned,
            "approvals": list(self.approvals),
            "risk": self.risk,
            "versions": [v.to_json() for v in self.versions],
        }

    @classmethod
    def from_json(cls, name: str, doc: Any) -> SkillRecord:
        if not isinstance(doc, dict):
            raise SkillError(f"registry: skill {name!r} is not an object")
        versions = doc.get("versions", [])
        approvals = doc.get("approvals", [])
        if not isinstance(versions, list) or not isinstance(approvals, list):
            raise SkillError(f"registry: skill {name!r} has invalid `versions` or `approvals`")
        risk = _opt(doc, "risk")
        if risk is not None and risk not in Risk.__members__:
            raise SkillError(f"registry: skill {name!r} has an invalid risk {risk!r}")
        record = cls(
            name=name,
            source=Source.from_json(doc.get("source")),
            enabled=bool(doc.get("enabled", True)),
            pinned=bool(doc.get("pinned", False)),
            approvals=[a for a in approvals if isinstance(a, str)],
            risk=risk,
            versions=[Version.from_json(v) for v in versions],
        )
        if sum(1 for v in record.versions if v.state is Lifecycle.ACTIVE) > 1:
            raise SkillError(f"registry: skill {name!r} has more than one active version")
        return record


@dataclass
class Registry:
    """The whole registry document."""

    skills: dict[str, SkillRecord] = field(default_factory=dict)
    quarantine: list[dict[str, Any]] = field(default_factory=list)  # sources refused as a whole
    builtin_disabled: list[str] = field(default_factory=list)

    def record_refusal(self, source: Source, reason: str, at: float) -> None:
        self.quarantine.append({"source": source.to_json(), "reason": reason, "at": at})
        del self.quarantine[:-SKILL_QUARANTINE_RECORDS_KEPT]

    def digests(self) -> set[str]:
        return {v.digest for r in self.skills.values() for v in r.versions if v.digest is not None}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "skills": {name: self.skills[name].to_json() for name in sorted(self.skills)},
            "quarantine": self.quarantine,
            "builtin_disabled": sorted(set(self.builtin_disabled)),
        }

    @classmethod
    def from_json(cls, doc: Any, path: Path) -> Registry:
        if not isinstance(doc, dict):
            raise SkillError(f"{path}: not a JSON object")
        schema = doc.get("schema")
        if schema != SCHEMA:
            if isinstance(schema, int) and schema > SCHEMA:
                raise SkillError(
                    f"{path} has schema {schema}; this ivoai reads schema {SCHEMA}: upgrade ivoai"
                )
            raise SkillError(f"{path}: missing or invalid `schema` (expected {SCHEMA})")
        skills = doc.get("skills", {})
        quarantine = doc.get("quarantine", [])
        disabled = doc.get("builtin_disabled", [])
        if not isinstance(skills, dict) or not isinstance(quarantine, list) or not isinstance(disabled, list):
            raise SkillError(f"{path}: `skills`, `quarantine` or `builtin_disabled` has the wrong type")
        if len(skills) > SKILLS_REGISTRY_MAX_SKILLS:
            raise SkillError(f"{path}: more than {SKILLS_REGISTRY_MAX_SKILLS} skills")
        return cls(
            skills={name: SkillRecord.from_json(name, rec) for name, rec in skills.items()},
            quarantine=[q for q in quarantine if isinstance(q, dict)],
            builtin_disabled=[d for d in disabled if isinstance(d, str)],
        )


def _text(doc: dict[str, Any], key: str, *, default: str | None = None) -> str:
    value = doc.get(key, default)
    if not isinstance(value, str):
        raise SkillError(f"registry: field {key!r} is not a string")
    return value


def _opt(doc: dict[str, Any], key: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise SkillError(f"registry: field {key!r} is not a string")
    return value


class SkillStore:
    """The registry file, its lock, the stored objects and the staging area."""

    def __init__(self, paths: XdgPaths | None = None) -> None:
        self.paths = paths or xdg_paths()
        self.state_root = self.paths.state
        self.root = self.state_root / "skills"
        self.registry_path = self.root / "registry.json"
        self.lock_path = self.root / ".registry.json.lock"
        self.objects = self.root / "objects"
        self.staging = self.root / "staging"

    def load(self) -> Registry:
        """The registry as stored; a missing file (or directory) is an empty registry. Creates nothing.

        Raises:
            UnsafePathError: a link, a foreign owner or a loose mode on the way.
            SkillError: unreadable JSON or a newer schema (fails closed).
        """
        data = read_private_file_or_none(self.state_root, self.registry_path, JSON_STATE_MAX_BYTES)
        if data is None:
            return Registry()
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            where = (
                f"line {exc.lineno}, column {exc.colno}"
                if isinstance(exc, json.JSONDecodeError)
                else "encoding"
            )
            raise SkillError(
                f"{self.registry_path}: invalid JSON at {where}; the file was left untouched"
            ) from None
        return Registry.from_json(doc, self.registry_path)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Registry]:
        """Lock, load, yield the registry for changes, publish it atomically, then collect garbage.

        When an error escapes, nothing is published and nothing stored is removed (an object
        stored before the error is unreferenced and goes with the next successful change).
        """
        ensure_private_dir(self.state_root, self.root)
        with file_lock(self.state_root, self.lock_path):
            remove_stale_staging(self.state_root, self.registry_path)
            registry = self.load()
            yield registry
            self.save(registry)
            self.collect_garbage(registry)

    def save(self, registry: Registry) -> None:
        """Publish (call only inside `transaction`)."""
        data = json.dumps(registry.to_json(), indent=1, sort_keys=True).encode("utf-8") + b"\n"
        if len(data) > JSON_STATE_MAX_BYTES:
            raise ValidationError(f"registry.json would exceed {JSON_STATE_MAX_BYTES} bytes")
        atomic_write(self.state_root, self.registry_path, data)

    def object_dir(self, digest: str) -> Path:
        if (
            not digest.startswith("sha256:")
            or len(digest) != 71
            or not all(c in "0123456789abcdef" for c in digest[7:])
        ):
            raise SkillError(f"invalid tree digest {digest[:80]!r}")
        return self.objects / digest[7:]

    def new_staging(self) -> Path:
        """A fresh private staging directory (call only inside `transaction`)."""
        ensure_private_dir(self.state_root, self.staging)
        path = self.staging / os.urandom(8).hex()
        os.close(open_private_dir(self.state_root, path, create=True))
        return path

    def collect_garbage(self, registry: Registry) -> list[str]:
        """Remove staging leftovers and objects no version refers to (call only inside `transaction`)."""
        removed: list[str] = []
        if self.staging.exists():
            for entry in sorted(os.listdir(self.staging)):
                shutil.rmtree(self.staging / entry, ignore_errors=True)
        if self.objects.exists():
            keep = {d[7:] for d in registry.digests()}
            for entry in sorted(os.listdir(self.objects)):
                if entry not in keep:
                    shutil.rmtree(self.objects / entry, ignore_errors=True)
                    removed.append(entry)
        return removed
