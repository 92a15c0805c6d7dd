"""Which skills a session or worker gets: dependencies, conflicts, compatibility, risk and roles.

Pure and deterministic: the same catalog and request always give the same selection in the same
order, and every skill that was considered but left out comes back with a stable code and a reason.

Rules, applied until nothing changes:

- roots are the skills asked for by name, or (for an AUTO worker) every active skill whose `roles`
  name the worker's role (and whose `phases`, if declared, include the task's phase);
- required dependencies are pulled in transitively; a missing one, one that is left out, or a
  dependency cycle leaves out every skill that needs it; optional dependencies are added when they
  pass every check and are otherwise skipped with their reason;
- each skill must be usable under policy (ALLOW, or REQUIRE_APPROVAL approved for its exact tree),
  support the executor, need no capability the session lacks, and stay within the risk ceiling;
- two skills in conflict, or claiming the same exclusive role: one that was asked for by name wins
  over one that was not; between equals both are left out (ambiguity fails closed);
- at most `max_skills` skills, roots taken in order with their dependencies.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from ivoai.client.skills import graph
from ivoai.client.skills.model import Risk, SkillMeta
from ivoai.client.skills.policy import PolicyResult
from ivoai.common.limits import SKILLS_PER_SESSION_MAX


class Candidate(NamedTuple):
    """One active, enabled skill as the resolver sees it (a NamedTuple: catalogs build 1,000s of them)."""

    meta: SkillMeta
    digest: str
    directory: str  # the stored, immutable tree
    policy: PolicyResult
    source: str = "dir"

    @property
    def name(self) -> str:
        return self.meta.name


class Exclusion(NamedTuple):
    """A skill that was considered and left out: a stable `code` and a one-line reason."""

    name: str
    code: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "code": self.code, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Request:
    """What the session or worker needs; `capabilities=None` means unrestricted."""

    requested: tuple[str, ...] = ()
    executor: str | None = None
    role: str | None = None
    phase: str | None = None
    capabilities: frozenset[str] | None = None
    risk_ceiling: Risk = Risk.HIGH
    max_skills: int = SKILLS_PER_SESSION_MAX


@dataclass(frozen=True, slots=True)
class Resolution:
    """Selected skills (dependencies before dependents) and every exclusion (sorted by name)."""

    selected: tuple[Candidate, ...]
    excluded: tuple[Exclusion, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "selected": [
                {
                    "name": c.name,
                    "digest": c.digest,
                    "directory": c.directory,
                    "version": c.meta.version,
                    "risk": c.policy.risk.label if c.policy.risk is not None else None,
                }
                for c in self.selected
            ],
            "excluded": [e.to_json() for e in self.excluded],
        }


@dataclass(slots=True)
class Catalog:
    """Candidates by name plus a role index, built once and resolved against many times."""

    skills: dict[str, Candidate]
    by_role: dict[str, list[str]] = field(default_factory=dict)
    # Request-independent facts, computed once per catalog (a plan resolves many requests against it).
    unusable: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (code, reason)
    capabilities: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, candidates: Iterable[Candidate]) -> Catalog:
        skills = {c.name: c for c in sorted(candidates, key=lambda c: c.name)}
        by_role: dict[str, list[str]] = {}
        unusable: dict[str, tuple[str, str]] = {}
        capabilities: dict[str, frozenset[str]] = {}
        for name, cand in skills.items():
            for role in cand.meta.roles:
                by_role.setdefault(role.lower(), []).append(name)
            policy = cand.policy
            if not policy.usable:
                code = "needs_approval" if policy.risk is Risk.HIGH else "denied"
                unusable[name] = (code, f"policy {policy.decision.value}: {policy.reasons[-1]}")
            capabilities[name] = frozenset(cand.meta.capabilities)
        return cls(skills, by_role, unusable, capabilities)


class _Run:
    """State of one resolution."""

    def __init__(self, catalog: Catalog, request: Request, roots: list[str], explicit: bool) -> None:
        self.index = catalog
        self.catalog: Mapping[str, Candidate] = catalog.skills
        self.request = request
        self.roots = roots
        self.root_set = set(roots)
        self.explicit = self.root_set if explicit else set()
        self.out: dict[str, Exclusion] = {}
        self.closure: dict[str, Candidate] = {}
        self.optional_of: dict[str, set[str]] = {}
        self.order: list[str] = []  # the closure, sorted (set by check_each)
        self.with_deps: list[str] = []  # the part of `order` with required dependencies

    def exclude(self, name: str, code: str, reason: str) -> None:
        if name not in self.out:
            self.out[name] = _new_exclusion(Exclusion, (name, code, reason))

    def alive(self, name: str) -> bool:
        return name in self.closure and name not in self.out

    def gather(self) -> None:
        pending = list(reversed(self.roots))
        while pending:
            name = pending.pop()
            if name in self.closure or name in self.out:
                continue
            cand = self.catalog.get(name)
            if cand is None:
                if name in self.root_set:
                    self.exclude(name, "not_installed", "no active, enabled skill has this name")
                continue
            self.closure[name] = cand
            meta = cand.meta
            if meta.dependencies:
                pending.extend(d for d in meta.dependencies if d not in self.closure)
            if meta.optional_dependencies:
                pending.extend(d for d in meta.optional_dependencies if d not in self.closure)
                for dep in meta.optional_dependencies:
                    self.optional_of.setdefault(dep, set()).add(name)

    def check_each(self) -> None:
        self.order = sorted(self.closure)  # closure is complete now; every later pass walks this order
        self.with_deps = [n for n in self.order if self.closure[n].meta.dependencies]
        req = self.request
        unusable = self.index.unusable
        capabilities = self.index.capabilities
        have = req.capabilities
        for name in self.order:
            cand = self.closure[name]
            meta = cand.meta
            risk = cand.policy.risk
            if name in unusable:
                self.exclude(name, *unusable[name])
            elif req.executor and meta.executors and req.executor not in meta.executors:
                self.exclude(name, "executor", f"supports {', '.join(meta.executors)}, not {req.executor}")
            elif have is not None and not capabilities[name] <= have:
                missing = ", ".join(sorted(capabilities[name] - have))
                self.exclude(name, "capability", f"needs capability {missing} this session lacks")
            elif risk is not None and risk > req.risk_ceiling:
                self.exclude(
                    name, "risk_ceiling", f"risk {risk.name} is above the ceiling {req.risk_ceiling.name}"
                )
            elif name in self.explicit or name not in self.root_set:
                continue
            elif req.phase and meta.phases and req.phase.lower() not in {p.lower() for p in meta.phases}:
                self.exclude(name, "phase", f"declares phases {', '.join(meta.phases)}, not {req.phase}")

    def cycles(self) -> None:
        closure = self.closure
        # only a skill with a dependency can be in a cycle
        for ring in graph.cycles(self.with_deps, lambda n: closure[n].meta.dependencies):
            for member in ring:
                self.exclude(member, "cycle", f"dependency cycle {graph.describe_cycle(ring)}")

    def propagate(self) -> bool:
        changed = False
        again = True
        while again:
            again = False
            for name in self.with_deps:
                if name in self.out:
                    continue
                for dep in self.closure[name].meta.dependencies:
                    if dep not in self.catalog:
                        self.exclude(
                            name, "dependency", f"requires `{dep}`, which is not installed or not active"
                        )
                    elif dep in self.out:
                        why = self.out[dep]
                        self.exclude(name, "dependency", f"requires `{dep}`, which was left out ({why.code})")
                    else:
                        continue
                    again = changed = True
                    break
        return changed

    def _standing(self, name: str) -> int:
        return 1 if name in self.explicit else 0

    def _settle(self, group: list[str], code: str, why: str) -> bool:
        """Keep the single explicitly requested member of a contested group; else leave all out."""
        best = max(self._standing(n) for n in group)
        winners = [n for n in group if self._standing(n) == best]
        keep = winners[0] if len(winners) == 1 else None
        for name in group:
            if name != keep:
                self.exclude(name, code, why if keep is None else f"{why}; `{keep}` was asked for by name")
        return True

    def conflicts(self) -> bool:
        """Each declared conflict between two live skills, settled in a fixed order (declarer first)."""
        changed = False
        for name in self.order:
            declared = self.closure[name].meta.conflicts
            if not declared:
                continue
            for other in sorted(declared):
                if self.alive(name) and self.alive(other):
                    changed = (
                        self._settle([name, other], "conflict", f"`{name}` and `{other}` conflict") or changed
                    )
        return changed

    def exclusive_roles(self) -> bool:
        claims: dict[str, list[str]] = {}
        for name in self.order:
            role = self.closure[name].meta.exclusive_role
            if role and self.alive(name):
                claims.setdefault(role.lower(), []).append(name)
        changed = False
        for role, names in sorted(claims.items()):
            if len(names) > 1:
                why = f"exclusive role `{role}` is claimed by {', '.join(names)}"
                changed = self._settle(names, "exclusive_role", why) or changed
        return changed

    def finish(self) -> Resolution:
        alive = self.closure.keys() - self.out.keys()
        edges: dict[str, list[str]] = {}
        for name in alive:
            meta = self.closure[name].meta
            if meta.dependencies or meta.optional_dependencies:
                edges[name] = [d for d in (*meta.dependencies, *meta.optional_dependencies) if d in alive]
        chosen: set[str] = set()
        for root in self.roots:
            if root not in alive:
                continue
            group = _reach(root, edges) if root in edges else {root}
            if len(chosen | group) > self.request.max_skills:
                self.exclude(
                    root, "budget", f"over the limit of {self.request.max_skills} skills per session"
                )
                continue
            chosen |= group
        for name in self.order:
            if name in chosen or name in self.out:
                continue
            if name in self.optional_of and not (self.optional_of[name] & chosen):
                self.exclude(name, "not_needed", "optional dependency of skills that were left out")
            else:
                self.exclude(name, "not_needed", "only needed by skills that were left out")
        for dep, users in sorted(self.optional_of.items()):
            if dep not in self.catalog and users & chosen:
                self.exclude(
                    dep,
                    "optional_missing",
                    f"optional dependency of {', '.join(sorted(users & chosen))}; not installed",
                )
        order = _topological({n: [d for d in edges.get(n, ()) if d in chosen] for n in chosen})
        return Resolution(tuple(self.closure[n] for n in order), tuple(self.out[n] for n in sorted(self.out)))


_new_exclusion = tuple.__new__  # builds the NamedTuple without its Python-level __new__ (hot path)


def _reach(root: str, edges: Mapping[str, list[str]]) -> set[str]:
    seen = {root}
    pending = [root]
    while pending:
        for dep in edges.get(pending.pop(), []):
            if dep not in seen:
                seen.add(dep)
                pending.append(dep)
    return seen


def _topological(edges: Mapping[str, list[str]]) -> list[str]:
    """Dependencies first; among the ready ones, by name."""
    waiting = {n: len(set(deps)) for n, deps in edges.items()}
    users: dict[str, list[str]] = {}
    for name, deps in edges.items():
        for dep in set(deps):
            users.setdefault(dep, []).append(name)
    ready = [n for n, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        name = heapq.heappop(ready)
        order.append(name)
        for user in users.get(name, []):
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    return order


def resolve(catalog: Catalog, request: Request) -> Resolution:
    """Select skills for `request` from `catalog`; see the module docstring for the rules."""
    if request.requested:
        roots = list(dict.fromkeys(request.requested))
        explicit = True
    elif request.role:
        roots = list(catalog.by_role.get(request.role.lower(), ()))
        explicit = False
    else:
        return Resolution((), ())
    run = _Run(catalog, request, roots, explicit)
    run.gather()
    run.check_each()
    run.cycles()
    while True:
        changed = run.propagate()
        changed = run.conflicts() or changed
        changed = run.exclusive_roles() or changed
        if not changed:
            break
    return run.finish()
