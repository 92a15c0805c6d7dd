"""The limit classifier: transient backs off, model-scoped goes cheaper, hard limits need confirmation."""

from __future__ import annotations

from ivoai.client.orchestration._classify import LimitKind, LimitSignal, backoff, classify
from ivoai.client.orchestration._quota import HardLimit, VendorQuota

CODEX_LIMIT_TEXT = "You've hit your usage limit. Upgrade to Pro or try again at 3:05 PM."


def _fresh(limit: bool) -> VendorQuota:
    hard = HardLimit("codex", True, "codex_app_server", 1.0, 2e9, "rate_limit_reached") if limit else None
    return VendorQuota(
        "codex", auth="authenticated", state="known", hard_limit=hard, observed_at=1.0, stale=False
    )


def test_limit_text_alone_never_confirms_a_hard_limit() -> None:
    verdict = classify(LimitSignal("codex", "message", CODEX_LIMIT_TEXT))
    assert verdict.kind is LimitKind.UNCONFIRMED and verdict.action == "reprobe" and not verdict.confirmed


def test_limit_text_with_a_fresh_read_showing_the_limit_is_confirmed() -> None:
    verdict = classify(LimitSignal("codex", "message", CODEX_LIMIT_TEXT), _fresh(True))
    assert verdict.kind is LimitKind.HARD_LIMIT and verdict.confirmed and verdict.action == "stop_vendor"
    assert verdict.resets_at == 2e9


def test_limit_text_that_a_fresh_read_contradicts_is_transient() -> None:
    verdict = classify(LimitSignal("codex", "message", CODEX_LIMIT_TEXT), _fresh(False), attempt=1)
    assert verdict.kind is LimitKind.TRANSIENT and verdict.backoff_seconds == backoff(1) == 60.0


def test_a_stale_read_is_not_a_confirmation() -> None:
    stale = VendorQuota("codex", hard_limit=HardLimit("codex", True, "x", 1.0), stale=True)
    assert classify(LimitSignal("codex", "message", CODEX_LIMIT_TEXT), stale).kind is LimitKind.UNCONFIRMED


def test_a_limit_of_one_codex_model_goes_to_a_cheaper_model() -> None:
    by_name = classify(
        LimitSignal("codex", "message", "usage limit", limit_name="GPT-6.2-Astra", model="gpt-6.2-astra")
    )
    assert by_name.kind is LimitKind.MODEL_SCOPED and by_name.action == "cheaper_model"
    by_text = classify(
        LimitSignal("codex", "message", "You've hit your usage limit for this model. Switch to another model")
    )
    assert by_text.kind is LimitKind.MODEL_SCOPED


def test_overload_429_and_capacity_are_transient() -> None:
    assert classify(LimitSignal("codex", "rpc_error", "busy", code=-32001)).kind is LimitKind.TRANSIENT
    assert (
        classify(LimitSignal("claude", "http_status", "Too Many Requests", code=429)).kind
        is LimitKind.TRANSIENT
    )
    assert (
        classify(LimitSignal("codex", "message", "Selected model is at capacity")).kind is LimitKind.TRANSIENT
    )


def test_claude_events_rejected_account_is_confirmed_and_rejected_model_is_scoped() -> None:
    hard = classify(
        LimitSignal(
            "claude",
            "rate_limit_event",
            info={"status": "rejected", "rateLimitType": "five_hour", "resetsAt": 1796150000},
        )
    )
    assert hard.kind is LimitKind.HARD_LIMIT and hard.confirmed and hard.resets_at == 1796150000.0
    opus = classify(
        LimitSignal(
            "claude", "rate_limit_event", info={"status": "rejected", "rateLimitType": "seven_day_opus"}
        )
    )
    assert opus.kind is LimitKind.MODEL_SCOPED and opus.model == "opus"
    warn = classify(
        LimitSignal(
            "claude", "rate_limit_event", info={"status": "allowed_warning", "rateLimitType": "seven_day"}
        )
    )
    assert warn.kind is LimitKind.TRANSIENT and warn.action == "warn"
    assert (
        classify(LimitSignal("claude", "rate_limit_event", info={"status": "allowed"})).kind is LimitKind.NONE
    )


def test_ordinary_errors_are_not_limits() -> None:
    assert classify(LimitSignal("codex", "message", "file not found: src/x.py")).kind is LimitKind.NONE
    assert backoff(10) == 900.0
