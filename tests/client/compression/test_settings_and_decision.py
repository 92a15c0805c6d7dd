"""Seed 003: requested-provider resolution, migration, and the per-session decision."""

from __future__ import annotations

import pytest

from ivoai.client.compression.decision import after_preflight, choose
from ivoai.client.compression.errors import CompressionSettingError
from ivoai.client.compression.settings import CompressionSetting, normalize, resolve_setting

CAVEMAN_HEADROOM = ("caveman", "headroom")


def test_missing_provider_on_a_new_install_is_caveman_by_default() -> None:
    assert resolve_setting({}) == CompressionSetting("caveman", "default")
    assert normalize({}, legacy=False) == {"compression.provider": "caveman", "compression.source": "default"}


def test_missing_provider_in_a_legacy_config_is_caveman_by_migration_and_unknown_keys_are_untouched() -> None:
    doc = {"compression": {"level": 3}, "other": {"x": 1}}
    assert normalize(doc, legacy=True) == {
        "compression.provider": "caveman",
        "compression.source": "migration",
    }


def test_legacy_headroom_without_a_source_is_preserved_as_migration() -> None:
    doc = {"compression": {"provider": "headroom"}}
    assert resolve_setting(doc, legacy=True) == CompressionSetting("headroom", "migration")
    assert normalize(doc, legacy=True) == {"compression.source": "migration"}


@pytest.mark.parametrize("provider", ["caveman", "headroom", "direct"])
def test_an_explicit_choice_is_never_replaced(provider: str) -> None:
    doc = {"compression": {"provider": provider, "source": "explicit"}}
    assert resolve_setting(doc, legacy=True) == CompressionSetting(provider, "explicit")
    assert normalize(doc, legacy=True) == {}
    assert normalize(doc, legacy=False) == {}


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"compression": {"provider": "zstd"}}, "compression.provider"),
        ({"compression": {"source": "guess"}}, "compression.source"),
        ({"compression": "caveman"}, "`compression` must be a table"),
    ],
)
def test_invalid_values_name_the_key_and_the_allowed_set(doc: dict[str, object], field: str) -> None:
    with pytest.raises(CompressionSettingError, match=field):
        resolve_setting(doc)


@pytest.mark.parametrize("requested", ["caveman", "headroom"])
def test_authoritative_knowledge_forces_direct_whatever_was_requested(requested: str) -> None:
    provider, decision = choose(
        CompressionSetting(requested, "explicit"), supported=CAVEMAN_HEADROOM, authoritative_sources=2
    )
    assert provider is None and decision is not None
    assert (decision.requested, decision.effective) == (requested, "direct")
    assert decision.bypass is True and decision.reason == "authoritative_knowledge"
    assert decision.authoritative_sources == 2


def test_a_healthy_provider_is_used_alone_and_a_failed_preflight_falls_back_to_direct() -> None:
    setting = CompressionSetting("caveman", "default")
    provider, decision = choose(setting, supported=CAVEMAN_HEADROOM, authoritative_sources=0)
    assert provider == "caveman" and decision is None
    ok = after_preflight(setting, "caveman", None)
    assert (ok.effective, ok.fallback, ok.reason) == ("caveman", False, None)
    failed = after_preflight(setting, "caveman", "caveman_health_timeout")
    assert (failed.effective, failed.fallback, failed.reason) == ("direct", True, "caveman_health_timeout")


def test_a_direct_only_executor_runs_direct_with_a_reason() -> None:
    provider, decision = choose(
        CompressionSetting("caveman", "default"), supported=(), authoritative_sources=0
    )
    assert provider is None and decision is not None
    assert (decision.effective, decision.reason, decision.fallback) == (
        "direct",
        "executor_direct_only",
        True,
    )


def test_providers_are_never_chained_every_decision_names_one_effective_provider() -> None:
    for requested in ("caveman", "headroom", "direct"):
        for sources in (0, 1):
            for supported in ((), CAVEMAN_HEADROOM):
                setting = CompressionSetting(requested, "explicit")
                provider, decision = choose(setting, supported=supported, authoritative_sources=sources)
                final = decision if decision is not None else after_preflight(setting, str(provider), None)
                assert final.effective in ("caveman", "headroom", "direct")
                assert final.effective in (requested, "direct")
