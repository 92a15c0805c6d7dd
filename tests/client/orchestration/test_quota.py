"""Quota normalization (documented schemas), pace, pressure and the shared ledger file."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from pathlib import Path

import jsonschema
import pytest

from ivoai.client.orchestration._ledger import QuotaLedger
from ivoai.client.orchestration._quota import (
    HardLimit,
    QuotaWindow,
    VendorQuota,
    clamp_percent,
    claude_event_hard_limit,
    claude_event_window,
    claude_statusline_windows,
    codex_windows,
    parse_reset,
)
from ivoai.common.paths import XdgPaths, xdg_paths
from tests.client.orchestration.plans import CODEX_SCHEMA
from tests.client.orchestration.support import fixture

NOW = 1796140000.0


@pytest.mark.parametrize(
    ("fixture_name", "schema"),
    [
        ("codex_rate_limits_ok.json", "GetAccountRateLimitsResponse.json"),
        ("codex_rate_limits_exhausted.json", "GetAccountRateLimitsResponse.json"),
        ("codex_rate_limits_legacy.json", "GetAccountRateLimitsResponse.json"),
        ("codex_rate_limits_updated.json", "AccountRateLimitsUpdatedNotification.json"),
        ("codex_account_chatgpt.json", "GetAccountResponse.json"),
        ("codex_model_list.json", "ModelListResponse.json"),
    ],
)
def test_every_codex_fixture_matches_the_schema_the_installed_codex_generates(
    fixture_name: str, schema: str
) -> None:
    validator = jsonschema.Draft7Validator(json.loads((CODEX_SCHEMA / schema).read_text()))
    validator.validate(fixture(fixture_name))


def test_codex_account_windows_and_a_model_scoped_bucket() -> None:
    windows, hard, plan = codex_windows(fixture("codex_rate_limits_ok.json"), NOW)
    by_key = {w.key: w for w in windows}
    assert by_key["codex:session:*"].used_percent == 42.0 and by_key["codex:session:*"].window_minutes == 300
    assert by_key["codex:weekly:*"].remaining_percent == 29.0
    astra = by_key["codex:weekly:gpt-6.2-astra"]
    assert astra.exhausted and astra.model == "gpt-6.2-astra"
    assert hard is None and plan == "pro"  # a model-scoped 100 % is not an account limit


def test_a_reached_account_limit_from_a_fresh_read_is_a_confirmed_hard_limit() -> None:
    windows, hard, _ = codex_windows(fixture("codex_rate_limits_exhausted.json"), NOW)
    assert hard is not None and hard.confirmed and hard.reason == "rate_limit_reached"
    assert hard.resets_at == NOW + 5400


def test_the_legacy_single_bucket_shape_still_reads() -> None:
    windows, hard, _ = codex_windows(fixture("codex_rate_limits_legacy.json"), NOW)
    assert [(w.kind, w.used_percent) for w in windows] == [("session", 12.0)] and hard is None


def test_values_are_clamped_and_garbage_stays_unknown() -> None:
    assert clamp_percent(140) == 100.0 and clamp_percent(-3) == 0.0
    assert clamp_percent("80") is None and clamp_percent(float("nan")) is None and clamp_percent(True) is None
    windows, hard, _ = codex_windows({"rateLimits": {"primary": {"usedPercent": "lots"}}}, NOW)
    assert windows == [] and hard is None  # nothing invented


def test_resets_at_accepts_epoch_seconds_milliseconds_and_iso() -> None:
    assert parse_reset(1796140000) == 1796140000.0
    assert parse_reset(1796140000123) == pytest.approx(1796140000.123)
    assert parse_reset("2026-12-01T12:00:00Z") == pytest.approx(1796126400.0)
    assert parse_reset("soon") is None and parse_reset(None) is None


def test_claude_statusline_payload_gives_session_and_weekly_windows() -> None:
    payload = {
        "rate_limits": {
            "five_hour": {"used_percentage": 37.5, "resets_at": "2026-12-01T20:00:00+00:00"},
            "seven_day": {"used_percentage": 80, "resets_at": NOW + 86400},
        }
    }
    windows = claude_statusline_windows(payload, NOW)
    assert [(w.kind, w.used_percent, w.window_minutes) for w in windows] == [
        ("session", 37.5, 300),
        ("weekly", 80.0, 10080),
    ]
    assert claude_statusline_windows({"model": {"id": "x"}}, NOW) == []  # before the first response


def test_claude_rejected_events_are_account_or_model_scoped() -> None:
    account = {"status": "rejected", "rateLimitType": "five_hour", "resetsAt": NOW + 60}
    limit = claude_event_hard_limit(account, NOW)
    assert limit is not None and limit.confirmed and limit.resets_at == NOW + 60
    sonnet = {"status": "rejected", "rateLimitType": "seven_day_sonnet", "resetsAt": NOW + 60}
    assert claude_event_hard_limit(sonnet, NOW) is None
    window = claude_event_window(
        {"status": "allowed_warning", "rateLimitType": "seven_day", "utilization": 0.91}, NOW
    )
    assert window is not None and window.used_percent == 91.0 and not window.exhausted


def test_pace_compares_use_with_elapsed_time() -> None:
    w = QuotaWindow("codex", "session", 60.0, NOW + 2 * 3600, 300, "codex_app_server", NOW)
    pace = w.pace(NOW)
    assert pace is not None and pace.elapsed_percent == 60.0 and pace.delta == 0.0
    assert QuotaWindow("codex", "session", None, NOW, 300, "x", NOW).pace(NOW) is None


def test_pressure_uses_the_tightest_window_and_unknown_counts_as_50() -> None:
    q = VendorQuota(
        "codex",
        windows=(
            QuotaWindow("codex", "session", 30.0, None, 300, "s", NOW),
            QuotaWindow("codex", "weekly", 85.0, None, 10080, "s", NOW),
        ),
    )
    assert q.pressure() == 85
    assert VendorQuota("codex").pressure() == 50


def _ledger(xdg: XdgPaths) -> QuotaLedger:
    return QuotaLedger(xdg, ttl_seconds=45)


def test_the_ledger_is_a_private_file_replaced_atomically(xdg: XdgPaths) -> None:
    ledger = _ledger(xdg)
    windows, hard, _ = codex_windows(fixture("codex_rate_limits_ok.json"), NOW)
    ledger.record_probe(
        VendorQuota("codex", auth="authenticated", state="known", windows=tuple(windows), observed_at=NOW)
    )
    mode = stat.S_IMODE(os.stat(ledger.path).st_mode)
    assert mode == 0o600 and stat.S_IMODE(os.stat(ledger.path.parent).st_mode) == 0o700
    view = ledger.view(NOW + 10)
    assert view.get("codex").auth == "authenticated" and not view.get("codex").stale
    assert ledger.view(NOW + 46).get("codex").stale
    assert [p.name for p in ledger.path.parent.iterdir() if p.name.startswith(".ledger")] == []


def test_a_failed_probe_keeps_the_cached_values_labelled_with_the_error(xdg: XdgPaths) -> None:
    ledger = _ledger(xdg)
    windows, _, _ = codex_windows(fixture("codex_rate_limits_ok.json"), NOW)
    ledger.record_probe(
        VendorQuota("codex", auth="authenticated", state="known", windows=tuple(windows), observed_at=NOW)
    )
    ledger.record_failure("codex", "codex app-server did not answer in time")
    q = ledger.view(NOW + 100).get("codex")
    assert q.stale and q.error == "codex app-server did not answer in time"
    assert q.window("session") is not None and q.window("session").used_percent == 42.0  # type: ignore[union-attr]
    assert q.hard_limit is None  # a failure never invents exhaustion


def test_expired_windows_and_limits_are_dropped_not_reset_to_zero(xdg: XdgPaths) -> None:
    ledger = _ledger(xdg)
    ledger.record_windows(
        "claude",
        [QuotaWindow("claude", "session", 100.0, NOW + 60, 300, "s", NOW)],
        hard_limit=HardLimit("claude", True, "claude_rate_limit_event", NOW, NOW + 60, "r"),
    )
    assert ledger.view(NOW + 30).get("claude").hard_limit is not None
    after = ledger.view(NOW + 61).get("claude")
    assert after.hard_limit is None and after.windows == () and after.state == "pending"


def test_a_corrupt_ledger_reads_as_unknown(xdg: XdgPaths) -> None:
    ledger = _ledger(xdg)
    ledger.record_auth("codex", "authenticated")
    ledger.path.write_bytes(b"{not json")
    assert ledger.view().get("codex").auth == "unknown"


def _writer(xdg_state: str, n: int, vendor: str) -> None:
    os.environ["XDG_STATE_HOME"] = xdg_state
    ledger = QuotaLedger(xdg_paths())
    for i in range(n):
        ledger.record_windows(
            vendor, [QuotaWindow(vendor, "session", float(i), None, 300, "t", NOW + i, model=f"m{i}")]
        )


def test_concurrent_processes_never_lose_each_others_observations(xdg: XdgPaths, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_writer, args=(os.environ["XDG_STATE_HOME"], 15, v)) for v in ("codex", "claude")
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    view = _ledger(xdg).view(NOW)
    assert len(view.get("codex").windows) == 15 and len(view.get("claude").windows) == 15
