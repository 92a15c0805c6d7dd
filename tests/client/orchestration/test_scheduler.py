"""The whole scheduler decision: the `--json` contract of `ivoai auto plan --check`."""

from __future__ import annotations

from ivoai.client.orchestration._scheduler import evaluate_plan
from tests.client.orchestration.plans import plan, providers, task, twelve_task_plan

TASK_KEYS = {"id", "score", "tier", "benefit", "overhead", "delegated", "reason", "profile"}


def test_a_twelve_task_plan_gets_a_decision_per_task_with_the_contract_fields() -> None:
    report = evaluate_plan(twelve_task_plan(), providers(), {})
    doc = report.to_dict()
    assert doc["valid"] is True and doc["errors"] == []
    assert len(doc["tasks"]) == 12
    for t in doc["tasks"]:
        assert set(t) >= TASK_KEYS
    scan = report.decision("scan")
    assert scan is not None and (scan.benefit, scan.overhead, scan.delegated) == (76, 32, True)
    assert scan.profile is not None
    synth = report.decision("synth")
    assert synth is not None and synth.delegated is False and synth.profile is None
    assert synth.tier.label == "strong"  # synthesis role minimum, above its score's tier


def test_the_role_minimum_raises_the_tier_above_the_score() -> None:
    doc = plan(
        task(
            "r",
            role="review",
            complexity=100,
            risk=0,
            reasoning_depth=0,
            verification_need=0,
            context_breadth=0,
            parallel_value=100,
            latency_sensitivity=0,
        )
    )
    decision = evaluate_plan(doc, providers(), {}).decision("r")
    assert decision is not None and decision.score == 30 and decision.score_tier.label == "balanced"
    assert decision.tier.label == "strong" and decision.delegated
    assert decision.profile is not None and decision.profile.model in ("gpt-6.2-sol", "sonnet")


def test_an_uneconomic_task_stays_with_the_primary_and_says_why() -> None:
    doc = plan(
        task(
            "tiny",
            complexity=5,
            risk=5,
            reasoning_depth=5,
            context_breadth=5,
            verification_need=5,
            parallel_value=5,
            latency_sensitivity=50,
        )
    )
    decision = evaluate_plan(doc, providers(), {}).to_dict()["tasks"][0]
    assert (decision["benefit"], decision["overhead"], decision["delegated"]) == (5, 46, False)
    assert decision["profile"] is None and "uneconomic" in decision["reason"]


def test_a_delegable_task_without_any_usable_client_is_not_delegated_and_names_the_reason() -> None:
    doc = plan(
        task("scan", parallel_value=90, complexity=70, risk=60, verification_need=70, context_breadth=60)
    )
    decision = evaluate_plan(doc, [], {}).to_dict()["tasks"][0]
    assert decision["delegated"] is False and decision["profile"] is None
    assert "no runtime-verified profile" in decision["reason"]


def test_an_invalid_plan_has_errors_and_no_decisions() -> None:
    doc = plan(task("a", deps=["a"]))
    out = evaluate_plan(doc, providers(), {}).to_dict()
    assert out["valid"] is False and out["tasks"] == []
    assert out["errors"] == [
        {"field": "tasks[0].dependencies[0]", "message": "a task cannot depend on itself"}
    ]


def test_an_unavailable_explicit_model_makes_the_plan_invalid_with_its_field() -> None:
    doc = plan(task("a"))
    doc["tasks"][0]["model"] = "gpt-9"
    out = evaluate_plan(doc, providers(), {}).to_dict()
    assert out["valid"] is False and out["errors"][0]["field"] == "tasks[0].model"
