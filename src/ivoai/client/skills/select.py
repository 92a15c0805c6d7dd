"""Skill selection for AUTO workers: only what the resolver and policy pick for one role and tier.

The orchestrator calls `select_for_worker` once per worker launch and hands the selection to
`attach.attach` (or `attach.worker_attachment`) with the worker's runtime directory. The primary
session never gets this broadcast: an interactive `ivoai codex|claude` session attaches only the
skills named with `--skill`.

The tier sets the risk ceiling (a stronger, more expensive worker is trusted with riskier skills):
LIGHT -> LOW, BALANCED -> MODERATE, STRONG and MAX -> HIGH (and HIGH still needs the user's
approval of the exact tree). A skill is a candidate only when its `roles` name the worker's role.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ivoai.client.skills.model import AUTO_ROLES, EXECUTORS, TIERS, Risk, SkillError
from ivoai.client.skills.resolver import Catalog, Request, Resolution, resolve
from ivoai.common.limits import SKILLS_PER_SESSION_MAX
from ivoai.common.paths import XdgPaths

TIER_RISK_CEILING = {"LIGHT": Risk.LOW, "BALANCED": Risk.MODERATE, "STRONG": Risk.HIGH, "MAX": Risk.HIGH}
_ROLE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")


def worker_request(
    role: str,
    tier: str,
    executor: str,
    capabilities: Iterable[str],
    *,
    phase: str | None = None,
    max_skills: int = SKILLS_PER_SESSION_MAX,
) -> Request:
    """Validate a worker's facts into a resolver request.

    Raises:
        SkillError: an unknown role, tier or executor (AUTO treats an unknown role as an error).
    """
    if not _ROLE.fullmatch(role) or role.lower() not in AUTO_ROLES:
        raise SkillError(f"unknown worker role {role[:64]!r} (known: {', '.join(AUTO_ROLES)})")
    tier_name = tier.upper()
    if tier_name not in TIERS:
        raise SkillError(f"unknown tier {tier[:16]!r} (known: {', '.join(TIERS)})")
    if executor not in EXECUTORS:
        raise SkillError(f"unknown executor {executor[:16]!r} (known: {', '.join(EXECUTORS)})")
    return Request(
        executor=executor,
        role=role.lower(),
        phase=phase,
        capabilities=frozenset(c.lower() for c in capabilities),
        risk_ceiling=TIER_RISK_CEILING[tier_name],
        max_skills=max_skills,
    )


def select_for_worker(
    role: str,
    tier: str,
    executor: str,
    capabilities: Iterable[str],
    *,
    phase: str | None = None,
    catalog: Catalog | None = None,
    paths: XdgPaths | None = None,
    max_skills: int = SKILLS_PER_SESSION_MAX,
) -> Resolution:
    """The skills one worker gets (with their stored directories) and a reason for every one left out.

    `capabilities` are what the worker can do (a read-only advisory worker: `read`, `search`, and
    `mcp`/`memory`/`context` when ivoai's knowledge tools are attached). Pass a prebuilt `catalog`
    when selecting for several workers of one plan; otherwise the registry is read (no lock).

    Raises:
        SkillError: invalid role, tier or executor, or an unreadable registry (fail closed).
    """
    request = worker_request(role, tier, executor, capabilities, phase=phase, max_skills=max_skills)
    if catalog is None:
        from ivoai.client.skills.service import SkillService

        catalog = SkillService(paths).catalog()
    return resolve(catalog, request)
