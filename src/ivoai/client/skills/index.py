"""The metadata-only index: find `SKILL.md` directories and read their front matter, nothing else.

No model call, no execution, no body: each `SKILL.md` is opened with O_NOFOLLOW from its directory's
descriptor and read only up to its closing `---` (see `frontmatter.read_front_matter`). Every
directory is opened with O_DIRECTORY|O_NOFOLLOW relative to its parent, so a symlink anywhere is
refused, never followed. Hidden directories (`.git`, `.github`) are not searched. A directory with
a `SKILL.md` is one skill; its subdirectories belong to it and are not searched for more skills.

Problems never raise out of `index_directory`: each becomes a `Quarantine` with the path and the
reason, so one bad skill does not hide the others. `check_set` then applies the checks that need the
whole set: duplicate names, missing dependencies (in the set or already installed) and cycles.
"""

from __future__ import annotations

import errno
import os
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from ivoai.client.skills import graph
from ivoai.client.skills._beneath import open_no_symlinks
from ivoai.client.skills.frontmatter import (
    SKILL_FILE,
    FrontMatterError,
    MissingSkillFile,
    parse_front_matter,
    read_front_matter,
)
from ivoai.client.skills.model import SkillError, SkillMeta
from ivoai.common.errors import UnsafePathError
from ivoai.common.limits import SKILL_SOURCE_MAX_SKILLS, SKILL_TREE_MAX_DEPTH, SKILL_TREE_MAX_FILES

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class IndexEntry(NamedTuple):
    """A skill found at `rel` (relative to the indexed root; "" for the root itself)."""

    rel: str
    meta: SkillMeta


@dataclass(frozen=True, slots=True)
class Quarantine:
    """A skill (or a path that looked like one) refused with its reason."""

    rel: str
    name: str | None
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"path": self.rel or ".", "name": self.name, "reason": self.reason}


@dataclass(slots=True)
class IndexResult:
    entries: list[IndexEntry] = field(default_factory=list)
    quarantined: list[Quarantine] = field(default_factory=list)


def open_directory(path: str | os.PathLike[str], error: type[SkillError] = SkillError) -> int:
    """Open a directory without following a symlink at `path` itself.

    Raises:
        SkillError (or `error`): a symlink, not a directory, or missing.
    """
    try:
        return os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        raise error(f"{os.fspath(path)} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise error(
                f"{os.fspath(path)} is a symlink or not a directory (links are never followed)"
            ) from None
        raise error(f"{os.fspath(path)} cannot be opened ({exc.strerror})") from None


def index_directory(
    root: str | os.PathLike[str], *, max_skills: int = SKILL_SOURCE_MAX_SKILLS
) -> IndexResult:
    """Index every skill below `root`; never raises for a skill's own problems (see `Quarantine`).

    Raises:
        SkillError: `root` itself cannot be opened as a directory.
    """
    root_fd = open_directory(root)
    result = IndexResult()
    try:
        if _try_skill(root_fd, "", "", result, max_skills):
            return result
        _walk(root_fd, result, max_skills)
    finally:
        os.close(root_fd)
    return result


def _try_skill(parent_fd: int, name: str, rel: str, result: IndexResult, max_skills: int) -> bool:
    """Index `name/SKILL.md` below `parent_fd`; False when there is no SKILL.md (not a skill)."""
    try:
        meta = parse_front_matter(
            read_front_matter(parent_fd, f"{name}/{SKILL_FILE}" if name else SKILL_FILE)
        )
    except MissingSkillFile:
        return False
    except FrontMatterError as exc:
        result.quarantined.append(Quarantine(rel, None, exc.message))
        return True
    if rel and name != meta.name:
        result.quarantined.append(
            Quarantine(rel, meta.name, f"name `{meta.name}` does not match its directory `{name}`")
        )
    elif len(result.entries) >= max_skills:
        result.quarantined.append(Quarantine(rel, meta.name, f"more than {max_skills} skills in one source"))
    else:
        result.entries.append(IndexEntry(rel, meta))
    return True


def _walk(root_fd: int, result: IndexResult, max_skills: int) -> None:
    """Breadth-first over directories that are not skills themselves (each opened without links)."""
    queue: deque[tuple[int, str, int]] = deque([(os.dup(root_fd), "", 0)])
    visited = 0
    try:
        while queue:
            fd, rel, depth = queue.popleft()
            try:
                with os.scandir(fd) as it:
                    children = sorted((e.name, e.is_symlink(), e.is_dir(follow_symlinks=False)) for e in it)
                for name, is_link, is_dir in children:
                    if name.startswith("."):
                        continue
                    child = f"{rel}/{name}" if rel else name
                    if is_link:
                        result.quarantined.append(Quarantine(child, None, "a symlink (never followed)"))
                    elif (
                        is_dir
                        and not _try_skill(fd, name, child, result, max_skills)
                        and depth + 1 < SKILL_TREE_MAX_DEPTH
                    ):
                        visited += 1
                        if visited > SKILL_TREE_MAX_FILES:
                            result.quarantined.append(
                                Quarantine(
                                    child,
                                    None,
                                    f"more than {SKILL_TREE_MAX_FILES} directories searched; stopped",
                                )
                            )
                            return
                        try:
                            queue.append(
                                (open_no_symlinks(fd, name, os.O_RDONLY | os.O_DIRECTORY), child, depth + 1)
                            )
                        except (OSError, UnsafePathError) as exc:
                            result.quarantined.append(
                                Quarantine(child, None, f"cannot be opened ({_why(exc)})")
                            )
            finally:
                os.close(fd)
    finally:
        while queue:
            os.close(queue.popleft()[0])


def _why(exc: Exception) -> str:
    if isinstance(exc, UnsafePathError):
        return "a symlink on its path"
    return getattr(exc, "strerror", None) or type(exc).__name__


def check_set(
    entries: list[IndexEntry], installed: Mapping[str, SkillMeta] | None = None
) -> tuple[list[IndexEntry], list[Quarantine]]:
    """Quarantine duplicates, skills with missing or quarantined dependencies, and dependency cycles.

    `installed` are the skills already active elsewhere (they satisfy dependencies; entries with the
    same name replace them).
    """
    installed = dict(installed or {})
    bad: dict[str, Quarantine] = {}  # by rel
    by_name: dict[str, list[IndexEntry]] = {}
    for entry in entries:
        by_name.setdefault(entry.meta.name, []).append(entry)
    for name, same in by_name.items():
        if len(same) > 1:
            places = ", ".join(e.rel or "." for e in same)
            for entry in same:
                bad[entry.rel] = Quarantine(entry.rel, name, f"duplicate name `{name}` (at {places})")
    metas: dict[str, SkillMeta] = {n: m for n, m in installed.items()}
    for name, same in by_name.items():
        if len(same) == 1:
            metas[name] = same[0].meta
    alive = {name: same[0] for name, same in by_name.items() if len(same) == 1}
    for ring in graph.cycles(metas, lambda n: metas[n].dependencies):
        for member in ring:
            if member in alive:
                entry = alive.pop(member)
                bad[entry.rel] = Quarantine(
                    entry.rel, member, f"dependency cycle {graph.describe_cycle(ring)}"
                )
    changed = True
    while changed:
        changed = False
        for name in sorted(alive):
            entry = alive[name]
            for dep in entry.meta.dependencies:
                if dep in alive or (dep in installed and dep not in by_name):
                    continue
                why = "was quarantined" if dep in by_name else "is neither in this source nor installed"
                bad[entry.rel] = Quarantine(entry.rel, name, f"requires `{dep}`, which {why}")
                del alive[name]
                changed = True
                break
    good = [e for e in entries if e.rel not in bad]
    return good, [bad[rel] for rel in sorted(bad)]
