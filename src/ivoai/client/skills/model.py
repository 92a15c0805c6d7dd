"""The skill control plane's vocabulary: risk levels, decisions, lifecycle states and skill metadata.

Pure data, no I/O. `SkillMeta` is what the metadata-only index extracts from a `SKILL.md` front
matter; it is stored in `registry.json` (`to_json` / `from_json`) so that listing, resolving and
policy never reopen a skill's files.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ivoai.common.errors import IvoaiError

EXECUTORS = ("codex", "claude", "opencode")
# AUTO's role vocabulary (design/AUTO.md); a skill's `roles` are matched against a worker's role.
AUTO_ROLES = ("research", "documentation", "implementation", "review", "security", "ops", "synthesis")
TIERS = ("LIGHT", "BALANCED", "STRONG", "MAX")
BUILTIN_PREFIX = "ivoai-"  # names reserved for skills ivoai itself ships


class SkillError(IvoaiError):
    """A skill operation failed; the message names the skill, the field or the limit."""

    code = "skill_error"


class StagingRefused(SkillError):
    """A source was refused before anything was stored (a link, a special file, a limit...)."""

    code = "skill_source_refused"


class FrontMatterError(SkillError):
    """The front matter is missing, unreadable or outside the accepted subset; the message says where."""

    code = "skill_front_matter"


class MissingSkillFile(FrontMatterError):
    """The directory has no SKILL.md (it is not a skill directory)."""

    code = "skill_file_missing"


class Risk(enum.IntEnum):
    """How much harm following a skill could do; ordered so `max()` is the stricter one."""

    LOW = 0
    MODERATE = 1
    HIGH = 2
    CRITICAL = 3

    @property
    def label(self) -> str:
        return self.name

    @classmethod
    def parse(cls, text: str) -> Risk:
        """`low|moderate|high|critical` in any case.

        Raises:
            ValueError: any other value.
        """
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"{text!r} is not one of low, moderate, high, critical") from None


class Decision(enum.StrEnum):
    """The policy engine's answer for one skill."""

    ALLOW = "ALLOW"
    DENY = "DENY"
    REQUIRE_APPROVAL = "REQUIRE_APPROVAL"


class Lifecycle(enum.StrEnum):
    """State of one stored version of a skill."""

    STAGED = "staged"  # stored and validated, not the active version
    ACTIVE = "active"  # the version sessions and workers get
    PREVIOUS = "previous"  # the version before the active one, kept for rollback
    QUARANTINED = "quarantined"  # refused by validation; nothing usable was stored


class SkillMeta(NamedTuple):
    """Front-matter facts of one skill; `other_keys` name (never quote) the keys ivoai does not model.

    A NamedTuple rather than a frozen dataclass: the index builds one per SKILL.md, and a tuple is
    built several times faster (indexing speed is one of this subsystem's measured figures).
    """

    name: str
    description: str
    version: str | None = None
    dependencies: tuple[str, ...] = ()
    optional_dependencies: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    executors: tuple[str, ...] = ()  # empty: every executor (SKILL.md is a cross-client format)
    capabilities: tuple[str, ...] = ()
    allowed_tools: tuple[str, ...] = ()  # Claude's `allowed-tools`: tools pre-approved while the skill runs
    risk: str | None = None  # as declared (upper case), validated by the parser
    roles: tuple[str, ...] = ()
    phases: tuple[str, ...] = ()
    exclusive_role: str | None = None
    other_keys: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "version": self.version,
            "dependencies": list(self.dependencies),
            "optional_dependencies": list(self.optional_dependencies),
            "conflicts": list(self.conflicts),
            "executors": list(self.executors),
            "capabilities": list(self.capabilities),
            "allowed_tools": list(self.allowed_tools),
            "risk": self.risk,
            "roles": list(self.roles),
            "phases": list(self.phases),
            "exclusive_role": self.exclusive_role,
            "other_keys": list(self.other_keys),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SkillMeta:
        """Rebuild from `to_json` output (registry.json); unknown fields are ignored.

        Raises:
            SkillError: a field has the wrong type.
        """

        def text(key: str, *, optional: bool = True) -> str | None:
            value = doc.get(key)
            if value is None and optional:
                return None
            if not isinstance(value, str):
                raise SkillError(f"registry: skill field {key!r} is not a string")
            return value

        def items(key: str) -> tuple[str, ...]:
            value = doc.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise SkillError(f"registry: skill field {key!r} is not a list of strings")
            return tuple(value)

        return cls(
            name=text("name", optional=False) or "",
            description=text("description", optional=False) or "",
            version=text("version"),
            dependencies=items("dependencies"),
            optional_dependencies=items("optional_dependencies"),
            conflicts=items("conflicts"),
            executors=items("executors"),
            capabilities=items("capabilities"),
            allowed_tools=items("allowed_tools"),
            risk=text("risk"),
            roles=items("roles"),
            phases=items("phases"),
            exclusive_role=text("exclusive_role"),
            other_keys=items("other_keys"),
        )


@dataclass(frozen=True, slots=True)
class UserPolicy:
    """What the *user* decided about one skill (stored in the registry, never read from the skill)."""

    risk: Risk | None = None  # replaces the declared risk; never below the floors ivoai derives
    approved_digests: frozenset[str] = field(default_factory=frozenset)
    builtin: bool = False  # shipped with ivoai (the only source allowed the `ivoai-` prefix)
