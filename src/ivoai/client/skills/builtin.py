"""Built-in skills: the ones ivoai ships as package data (`ivoai/skills/<name>/SKILL.md`).

They are a source like any other for listing, resolving and attaching, but never stored in
registry.json (only "disabled" is) and never updated or removed: the package is the object. The
server serves the same bytes (`docs/server.md`, "Skill delivery"); the client reads them from the
installed package without importing the server.

What ivoai knows about its own skill is declared here, in code, not read from the skill: roles,
capabilities and risk. A SKILL.md stays the plain Agent Skills format (claude.ai's importer accepts
only a few front-matter keys), and no text in a skill ever sets its own policy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources

from ivoai.client.skills.frontmatter import parse_front_matter, read_front_matter
from ivoai.client.skills.index import open_directory
from ivoai.client.skills.model import AUTO_ROLES, Risk, SkillError, SkillMeta
from ivoai.client.skills.tree import TreeFacts, tree_facts


@dataclass(frozen=True, slots=True)
class BuiltinSpec:
    roles: tuple[str, ...]
    capabilities: tuple[str, ...]
    risk: Risk


# The memory/context research order is useful to every worker that has ivoai's knowledge tools;
# the `memory`/`context` capabilities keep it away from workers without them.
BUILTINS: dict[str, BuiltinSpec] = {
    "ivoai-memory-context": BuiltinSpec(AUTO_ROLES, ("mcp", "memory", "context"), Risk.LOW),
}


@dataclass(frozen=True, slots=True)
class BuiltinSkill:
    meta: SkillMeta
    directory: str
    facts: TreeFacts


def builtin_directory(name: str) -> str:
    """The installed package directory of a built-in skill.

    Raises:
        SkillError: not a built-in skill, or the package data is missing.
    """
    if name not in BUILTINS:
        raise SkillError(f"{name!r} is not a built-in skill")
    path = os.fspath(str(resources.files("ivoai").joinpath("skills", name)))
    if not os.path.isdir(path):
        raise SkillError(f"the built-in skill {name} is missing from this installation ({path})")
    return path


def load_builtin(name: str) -> BuiltinSkill:
    """Index one built-in skill (front matter only) and hash its tree.

    Raises:
        SkillError: missing or malformed package data.
    """
    spec = BUILTINS[name]
    directory = builtin_directory(name)
    fd = open_directory(directory)
    try:
        meta = parse_front_matter(read_front_matter(fd))
    finally:
        os.close(fd)
    if meta.name != name:
        raise SkillError(f"the built-in skill {name} declares the name {meta.name!r}")
    meta = meta._replace(
        roles=spec.roles,
        capabilities=tuple(sorted({*meta.capabilities, *spec.capabilities})),
        risk=spec.risk.name,
    )
    return BuiltinSkill(meta, directory, tree_facts(directory))


def all_builtins() -> list[BuiltinSkill]:
    return [load_builtin(name) for name in sorted(BUILTINS)]
