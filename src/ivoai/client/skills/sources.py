"""`ivoai.core.skills` contracts implemented over the skill control plane (identity, probe, discovery)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ivoai.client.skills.builtin import all_builtins
from ivoai.client.skills.index import index_directory
from ivoai.client.skills.model import SkillError
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
