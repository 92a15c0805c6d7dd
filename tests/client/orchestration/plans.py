"""Plan documents and real catalogue fixtures shared by the orchestration tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ivoai.client.orchestration._catalogue import Catalogue, assign_tiers, claude_catalogue, codex_catalogue
from ivoai.client.orchestration._profiles import VENDOR_CAPABILITIES, ProviderFacts

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CODEX_SCHEMA = FIXTURES / "codex_schema"


def signals(**overrides: int) -> dict[str, int]:
    """All seven signals at 50 unless overridden."""
    base = {
        "complexity": 50,
        "risk": 50,
        "reasoning_depth": 50,
        "context_breadth": 50,
        "verification_need": 50,
        "parallel_value": 50,
        "latency_sensitivity": 50,
    }
    base.update(overrides)
    return base


def task(
    tid: str,
    *,
    deps: list[str] | None = None,
    role: str = "research",
    delegate: bool = True,
    text: str | None = None,
    sig: dict[str, int] | None = None,
    **more: int,
) -> dict[str, Any]:
    """One valid task document."""
    return {
        "id": tid,
        "role": role,
        "task": text if text is not None else f"Investigate part {tid} of the module and list findings.",
        "dependencies": deps or [],
        "signals": signals(**(sig or {}), **more),
        "acceptance_criteria": [f"findings for {tid} name the files they concern"],
        "delegate": delegate,
    }


def plan(
    *tasks: dict[str, Any], objective: str = "Review the parser module and report defects"
) -> dict[str, Any]:
    """A plan document."""
    return {"objective": objective, "tasks": list(tasks)}


def twelve_task_plan() -> dict[str, Any]:
    """12 tasks: a fan-out of 10 research/review tasks over one scan, joined by a synthesis."""
    tasks = [
        task(
            "scan",
            parallel_value=90,
            complexity=70,
            risk=60,
            verification_need=70,
            context_breadth=60,
            latency_sensitivity=20,
        )
    ]
    for i in range(10):
        tasks.append(
            task(
                f"part{i}",
                deps=["scan"],
                role="review" if i % 2 else "research",
                parallel_value=90,
                complexity=40 + 5 * i,
                risk=30 + 5 * i,
                verification_need=60,
                context_breadth=50,
                latency_sensitivity=30,
            )
        )
    tasks.append(task("synth", deps=[f"part{i}" for i in range(10)], role="synthesis", delegate=False))
    return plan(*tasks)


def codex_catalogue_fixture() -> Catalogue:
    """The real `model/list` answer of codex 0.171.0 (captured), with tiers assigned."""
    raw = json.loads((FIXTURES / "codex_model_list.json").read_text())
    return assign_tiers(codex_catalogue(raw, "0.171.0", now=1.0))


def claude_catalogue_fixture() -> Catalogue:
    """The real `initialize` models of claude 2.1.197 (captured), with tiers assigned."""
    raw = json.loads((FIXTURES / "claude_initialize_models.json").read_text())
    return assign_tiers(claude_catalogue(raw, "2.1.197", now=1.0))


def providers(*, codex: bool = True, claude: bool = True) -> list[ProviderFacts]:
    """Both vendors worker-capable and logged in, with the real catalogues."""
    out = []
    if codex:
        out.append(
            ProviderFacts(
                "codex",
                True,
                "authenticated",
                "0.171.0",
                codex_catalogue_fixture(),
                VENDOR_CAPABILITIES["codex"],
            )
        )
    if claude:
        out.append(
            ProviderFacts(
                "claude",
                True,
                "authenticated",
                "2.1.197",
                claude_catalogue_fixture(),
                VENDOR_CAPABILITIES["claude"],
            )
        )
    return out
