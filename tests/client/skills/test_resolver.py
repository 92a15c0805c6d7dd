"""The resolver: dependencies, cycles, conflicts, exclusive roles, compatibility, budget, determinism."""

from __future__ import annotations

import random

from ivoai.client.skills.frontmatter import parse_front_matter
from ivoai.client.skills.model import Risk
from ivoai.client.skills.policy import evaluate
from ivoai.client.skills.resolver import Candidate, Catalog, Request, resolve


def cand(name: str, extra: str = "") -> Candidate:
    meta = parse_front_matter(f"name: {name}\ndescription: The {name} skill\n{extra}")
    return Candidate(meta, f"sha256:{name}", f"/objects/{name}", evaluate(meta, digest=f"sha256:{name}"))


def names(resolution: object) -> list[str]:
    return [c.name for c in resolution.selected]  # type: ignore[attr-defined]


def reasons(resolution: object) -> dict[str, str]:
    return {e.name: f"{e.code}: {e.reason}" for e in resolution.excluded}  # type: ignore[attr-defined]


def test_required_dependencies_come_first_and_optional_ones_when_usable() -> None:
    catalog = Catalog.build(
        [
            cand("app", "dependencies: [lib]\noptional-dependencies: [extra, shelly, absent]\n"),
            cand("lib", "dependencies: [core]\n"),
            cand("core"),
            cand("extra"),
            cand("shelly", "capabilities: [shell]\n"),
        ]
    )
    result = resolve(catalog, Request(requested=("app",)))
    assert names(result) == ["core", "extra", "lib", "app"]
    assert reasons(result) == {
        "absent": "optional_missing: optional dependency of app; not installed",
        "shelly": "denied: policy DENY: claims `shell`: shell is never allowed",
    }


def test_a_missing_or_left_out_dependency_leaves_its_dependents_out() -> None:
    catalog = Catalog.build(
        [cand("top", "dependencies: [mid]\n"), cand("mid", "dependencies: [gone]\n"), cand("free")]
    )
    result = resolve(catalog, Request(requested=("top", "free", "nope")))
    assert names(result) == ["free"]
    assert reasons(result) == {
        "mid": "dependency: requires `gone`, which is not installed or not active",
        "nope": "not_installed: no active, enabled skill has this name",
        "top": "dependency: requires `mid`, which was left out (dependency)",
    }


def test_a_dependency_cycle_is_left_out_with_the_cycle_named() -> None:
    catalog = Catalog.build(
        [cand("a", "dependencies: [b]\n"), cand("b", "dependencies: [c]\n"), cand("c", "dependencies: [a]\n")]
    )
    result = resolve(catalog, Request(requested=("a",)))
    assert names(result) == []
    assert set(reasons(result).values()) == {"cycle: dependency cycle a -> b -> c -> a"}


def test_conflicts_and_exclusive_roles_prefer_the_skill_asked_for_and_fail_closed_between_equals() -> None:
    catalog = Catalog.build(
        [
            cand("black", "exclusive-role: formatter\nroles: [implementation]\n"),
            cand("yapf", "exclusive-role: formatter\nroles: [implementation]\n"),
            cand("strict", "conflicts: [loose]\nroles: [implementation]\n"),
            cand("loose", "roles: [implementation]\n"),
        ]
    )
    by_role = resolve(catalog, Request(role="implementation"))
    assert names(by_role) == []
    assert reasons(by_role) == {
        "black": "exclusive_role: exclusive role `formatter` is claimed by black, yapf",
        "yapf": "exclusive_role: exclusive role `formatter` is claimed by black, yapf",
        "loose": "conflict: `strict` and `loose` conflict",
        "strict": "conflict: `strict` and `loose` conflict",
    }
    pulled = Catalog.build([*catalog.skills.values(), cand("helper", "dependencies: [loose]\n")])
    asked = resolve(pulled, Request(requested=("strict", "helper")))
    assert names(asked) == ["strict"]
    assert reasons(asked) == {
        "loose": "conflict: `strict` and `loose` conflict; `strict` was asked for by name",
        "helper": "dependency: requires `loose`, which was left out (conflict)",
    }


def test_two_skills_asked_for_that_claim_one_exclusive_role_are_both_left_out() -> None:
    catalog = Catalog.build(
        [cand("black", "exclusive-role: formatter\n"), cand("yapf", "exclusive-role: formatter\n")]
    )
    result = resolve(catalog, Request(requested=("black", "yapf")))
    assert names(result) == []
    assert reasons(result)["black"] == "exclusive_role: exclusive role `formatter` is claimed by black, yapf"


def test_executor_capabilities_risk_ceiling_and_phase_are_checked() -> None:
    catalog = Catalog.build(
        [
            cand("codex-only", "executors: [codex]\nroles: [review]\n"),
            cand("writer", "capabilities: [write]\nroles: [review]\n"),
            cand("risky", "risk: high\nroles: [review]\n"),
            cand("late", "phases: [ship]\nroles: [review]\n"),
            cand("ok", "roles: [review]\n"),
        ]
    )
    request = Request(role="review", executor="claude", capabilities=frozenset({"read"}), phase="plan")
    result = resolve(catalog, request)
    assert names(result) == ["ok"]
    assert reasons(result) == {
        "codex-only": "executor: supports codex, not claude",
        "late": "phase: declares phases ship, not plan",
        "risky": "needs_approval: policy REQUIRE_APPROVAL: HIGH risk requires your approval: "
        "ivoai skills enable risky --approve",
        "writer": "capability: needs capability write this session lacks",
    }
    ceiling = resolve(catalog, Request(requested=("writer",), risk_ceiling=Risk.LOW))
    assert reasons(ceiling) == {"writer": "risk_ceiling: risk MODERATE is above the ceiling LOW"}


def test_the_budget_keeps_whole_roots_with_their_dependencies() -> None:
    catalog = Catalog.build([cand("a", "dependencies: [b]\n"), cand("b"), cand("c"), cand("d")])
    result = resolve(catalog, Request(requested=("c", "a", "d"), max_skills=3))
    assert names(result) == ["b", "a", "c"]
    assert reasons(result) == {"d": "budget: over the limit of 3 skills per session"}


def test_resolution_is_deterministic_whatever_the_catalog_order() -> None:
    skills = [
        cand(
            f"s{i}",
            f"roles: [research]\ndependencies: [s{(i * 7 + 1) % 20}]\n" if i % 3 else "roles: [research]\n",
        )
        for i in range(20)
    ]
    first = resolve(Catalog.build(skills), Request(role="research", max_skills=12))
    for seed in range(5):
        shuffled = list(skills)
        random.Random(seed).shuffle(shuffled)
        again = resolve(Catalog.build(shuffled), Request(role="research", max_skills=12))
        assert again == first
    assert {c.name for c in first.selected}.isdisjoint(e.name for e in first.excluded)
