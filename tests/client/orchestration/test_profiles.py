"""Profile choice over the real catalogues of codex 0.171.0 and claude 2.1.197 (captured fixtures)."""

from __future__ import annotations

import pytest

from ivoai.client.orchestration._catalogue import assign_tiers, choose_effort, codex_catalogue
from ivoai.client.orchestration._profiles import ProviderFacts, choose_profile
from ivoai.client.orchestration._quota import (
    HardLimit,
    QuotaWindow,
    VendorQuota,
    claude_event_window,
)
from ivoai.client.orchestration._scoring import Tier
from tests.client.orchestration.plans import claude_catalogue_fixture, codex_catalogue_fixture, providers


def _window(vendor: str, used: float, *, model: str | None = None, kind: str = "weekly") -> QuotaWindow:
    return QuotaWindow(vendor, kind, used, 2e9, 10080, "codex_app_server", 1.0, model=model)  # type: ignore[arg-type]


def test_the_lowest_sufficient_tier_is_chosen_with_the_tiers_effort() -> None:
    light = choose_profile(Tier.LIGHT, providers(claude=False), {})
    assert light.profile is not None
    assert (light.profile.model, light.profile.effort) == ("gpt-6-luna", "low")
    strong = choose_profile(Tier.STRONG, providers(claude=False), {})
    assert strong.profile is not None and (strong.profile.model, strong.profile.effort) == (
        "gpt-6.2-sol",
        "high",
    )
    top = choose_profile(Tier.MAX, providers(claude=False), {})
    assert top.profile is not None and (top.profile.model, top.profile.effort) == ("gpt-6.2-astra", "max")


def test_lower_quota_pressure_breaks_a_tie_between_vendors() -> None:
    quotas = {
        "codex": VendorQuota("codex", windows=(_window("codex", 80.0),)),
        "claude": VendorQuota("claude", windows=(_window("claude", 10.0),)),
    }
    choice = choose_profile(Tier.MAX, providers(), quotas)
    assert choice.profile is not None and choice.profile.vendor == "claude" and choice.profile.pressure == 10
    quotas["claude"] = VendorQuota("claude", windows=(_window("claude", 95.0),))
    choice = choose_profile(Tier.MAX, providers(), quotas)
    assert choice.profile is not None and choice.profile.vendor == "codex"


def test_unknown_quota_counts_as_pressure_50_and_never_blocks() -> None:
    choice = choose_profile(
        Tier.STRONG, providers(claude=False), {"codex": VendorQuota("codex", state="unknown")}
    )
    assert choice.profile is not None and choice.profile.pressure == 50


def test_a_model_scoped_codex_limit_picks_the_cheaper_model_of_the_same_vendor() -> None:
    quota = VendorQuota("codex", windows=(_window("codex", 100.0, model="gpt-6.2-astra"),))
    choice = choose_profile(Tier.MAX, providers(claude=False), {"codex": quota})
    assert choice.profile is not None
    assert (choice.profile.model, choice.profile.downgraded) == ("gpt-6.2-sol", True)
    assert "model limit on gpt-6.2-astra" in choice.reason


def test_a_claude_opus_weekly_rejection_blocks_opus_only_and_sonnet_runs() -> None:
    info = {"status": "rejected", "rateLimitType": "seven_day_opus", "resetsAt": 2_000_000_000}
    window = claude_event_window(info, 1.0)
    assert window is not None and window.model == "opus" and window.exhausted
    quota = VendorQuota("claude", windows=(window,))
    choice = choose_profile(Tier.MAX, providers(codex=False), {"claude": quota})
    assert choice.profile is not None and choice.profile.model == "sonnet" and choice.profile.downgraded
    assert quota.hard_limit is None  # a model-scoped limit is not an account limit


def test_a_confirmed_hard_limit_or_logout_removes_the_vendor() -> None:
    codex_limited = VendorQuota(
        "codex", hard_limit=HardLimit("codex", True, "codex_app_server", 1.0, 2e9, "x")
    )
    choice = choose_profile(Tier.LIGHT, providers(), {"codex": codex_limited})
    assert choice.profile is not None and choice.profile.vendor == "claude"
    logged_out = [ProviderFacts("codex", True, "unauthenticated", "0.171.0", codex_catalogue_fixture())]
    none = choose_profile(Tier.LIGHT, logged_out, {})
    assert none.profile is None and "codex: not logged in" in none.reason


def test_an_explicit_model_or_effort_that_is_not_available_is_an_error_not_a_fallback() -> None:
    missing = choose_profile(Tier.LIGHT, providers(), {}, model="gpt-9")
    assert missing.profile is None and missing.error and "gpt-9" in missing.reason
    bad_effort = choose_profile(Tier.LIGHT, providers(), {}, model="haiku", effort="high")
    assert bad_effort.profile is None and bad_effort.error and "offers none" in bad_effort.reason
    ok = choose_profile(Tier.LIGHT, providers(), {}, model="gpt-5.5", effort="xhigh")
    assert ok.profile is not None and ok.profile.explicit and ok.profile.effort == "xhigh"


def test_hidden_and_untiered_models_are_never_chosen_automatically() -> None:
    cat = codex_catalogue_fixture()
    tiers = {m.id: m.tier for m in cat.models}
    assert tiers["gpt-5.5"] is None and tiers["codex-auto-review"] is None
    assert {m.tier_source for m in cat.models if m.tier is not None} == {"reviewed"}


def test_the_clients_default_model_serves_every_tier_when_nothing_else_is_known() -> None:
    raw = {
        "data": [
            {
                "id": "brand-new",
                "displayName": "New",
                "isDefault": True,
                "hidden": False,
                "supportedReasoningEfforts": [{"reasoningEffort": "low"}, {"reasoningEffort": "high"}],
            }
        ]
    }
    cat = assign_tiers(codex_catalogue(raw, "9.9.9"))
    facts = [ProviderFacts("codex", True, "authenticated", "9.9.9", cat, providers()[0].capabilities)]
    choice = choose_profile(Tier.BALANCED, facts, {})
    assert choice.profile is not None and choice.profile.tier_source == "client_default"
    assert choice.profile.effort == "low"  # medium is not offered: the highest effort below it


def test_config_overrides_win_over_the_reviewed_table() -> None:
    raw_cat = codex_catalogue_fixture()
    cat = assign_tiers(raw_cat, {"codex:gpt-5.5": Tier.LIGHT, "codex:gpt-6-luna": Tier.BALANCED})
    assert cat.get("gpt-5.5") is not None and cat.get("gpt-5.5").tier is Tier.LIGHT  # type: ignore[union-attr]
    assert cat.get("gpt-6-luna").tier_source == "config"  # type: ignore[union-attr]


def test_claude_default_alias_is_folded_into_the_model_it_resolves_to() -> None:
    cat = claude_catalogue_fixture()
    assert [m.id for m in cat.models] == ["opus[1m]", "sonnet", "haiku"]
    opus = cat.get("opus[1m]")
    assert opus is not None and opus.is_default and opus.tier is Tier.MAX


@pytest.mark.parametrize(
    ("tier", "effort"),
    [(Tier.LIGHT, "low"), (Tier.BALANCED, "medium"), (Tier.STRONG, "high"), (Tier.MAX, "max")],
)
def test_effort_per_tier(tier: Tier, effort: str) -> None:
    opus = claude_catalogue_fixture().get("opus[1m]")
    assert opus is not None and choose_effort(opus, tier) == effort
