"""Skill sources: the `ivoai.core.skills` contracts over the control plane (identity, probe, discovery),
and `make_source`, which builds a registry `Source` from the CLI's words."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ivoai.client.skills.archive import is_url, normalize_sha256
from ivoai.client.skills.builtin import all_builtins
from ivoai.client.skills.gitsource import check_commit, check_git_url
from ivoai.client.skills.index import index_directory
from ivoai.client.skills.model import SkillError
from ivoai.client.skills.registry import Source
from ivoai.common.errors import UsageError
from ivoai.core.health import Health, HealthState
from ivoai.core.skills import SkillRef


class BuiltinSource:
    """The skills ivoai ships (`ivoai/skills/` package data)."""

    source_id = "builtin"
    kind = "builtin"

    def probe(self) -> Health:
        try:
            count = len(all_builtins())
        except (SkillError, OSError) as exc:
            return Health(HealthState.UNHEALTHY, str(getattr(exc, "message", exc)))
        return Health(HealthState.HEALTHY, f"{count} built-in skill(s)")

    def discover(self) -> Sequence[SkillRef]:
        return [
            SkillRef(b.meta.name, b.meta.description, b.meta.version, b.facts.digest) for b in all_builtins()
        ]


class LocalDirSource:
    """A local directory of skills, read in place (front matter only, no staging, no link followed)."""

    kind = "dir"

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)

    @property
    def source_id(self) -> str:
        return f"dir:{self.path}"

    def probe(self) -> Health:
        try:
            result = index_directory(self.path)
        except SkillError as exc:
            return Health(HealthState.UNHEALTHY, exc.message)
        if result.quarantined:
            return Health(HealthState.DEGRADED, f"{len(result.quarantined)} skill(s) would be quarantined")
        return Health(HealthState.HEALTHY, f"{len(result.entries)} skill(s)")

    def discover(self) -> Sequence[SkillRef]:
        result = index_directory(self.path)
        return [SkillRef(e.meta.name, e.meta.description, e.meta.version) for e in result.entries]


def make_source(
    location: str,
    *,
    kind: str | None = None,
    commit: str | None = None,
    sha256: str | None = None,
    subdir: str | None = None,
) -> Source:
    """Build and validate a source from the CLI's words (`--commit` means git, `--sha256` an archive).

    Raises:
        UsageError: contradictory or missing pins.
        StagingRefused: an unsafe location.
    """
    if kind is None:
        kind = "git" if commit else "archive" if sha256 else "dir"
    if kind == "git":
        if not commit:
            raise UsageError("a git source needs --commit FULL_ID (git sources are pinned to one commit)")
        if sha256:
            raise UsageError("--sha256 is for archives; a git source is pinned by --commit")
        url = location if is_url(location) or not os.path.exists(location) else os.path.abspath(location)
        return Source("git", check_git_url(url), commit=check_commit(commit), subdir=subdir)
    if kind == "archive":
        if not sha256:
            raise UsageError("an archive source needs --sha256 HEX (archives are pinned by their digest)")
        if commit:
            raise UsageError("--commit is for git sources; an archive is pinned by --sha256")
        where = location if is_url(location) else os.path.abspath(location)
        if is_url(where):
            from ivoai.client.skills.archive import check_url

            check_url(where)
        return Source("archive", where, sha256=normalize_sha256(sha256), subdir=subdir)
    if kind != "dir":
        raise UsageError(f"unknown source kind {kind!r} (dir, git, archive)")
    if commit or sha256:
        raise UsageError("--commit and --sha256 pin git and archive sources; a local directory has neither")
    return Source("dir", os.path.abspath(location), subdir=subdir)
