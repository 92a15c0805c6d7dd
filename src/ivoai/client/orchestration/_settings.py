"""AUTO settings from config.toml's `[auto]` table (the orchestration composition roots read this).

Keys: `auto.workers` (1-3, default 2: concurrent workers per session), `auto.quota_cache_seconds`
(30-300, default 45), and the table `[auto.model_tiers]` (`"codex:MODEL" = "light|balanced|strong|
max"`), which assigns a capability tier to a model the reviewed table does not know or overrides it.
Issue 16: `auto.resume_after_reset` (boolean, default false), `auto.resume_windows` (1-10, default
3), `auto.conserve_threshold` (1-100, default 10: remaining % at or below which AUTO asks before
routing on) and `auto.coordinator` (`native` or `ruflo`, default `native`).
An invalid value is an error naming the key; a missing file or table gives the defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ivoai.client.orchestration._scoring import Tier
from ivoai.common.errors import ValidationError
from ivoai.common.limits import (
    AUTO_RESUME_WINDOWS_DEFAULT,
    AUTO_RESUME_WINDOWS_MAX,
    AUTO_WORKER_TIMEOUT_DEFAULT_SECONDS,
    AUTO_WORKER_TURNS_DEFAULT,
    AUTO_WORKERS_DEFAULT,
    AUTO_WORKERS_MAX,
    QUOTA_CACHE_DEFAULT_SECONDS,
    QUOTA_CACHE_MAX_SECONDS,
    QUOTA_CACHE_MIN_SECONDS,
    QUOTA_CONSERVE_THRESHOLD_PERCENT,
)
from ivoai.common.paths import XdgPaths
from ivoai.common.validate import is_int


@dataclass(frozen=True)
class AutoSettings:
    """Validated AUTO settings."""

    workers: int = AUTO_WORKERS_DEFAULT
    quota_cache_seconds: int = QUOTA_CACHE_DEFAULT_SECONDS
    model_tiers: Mapping[str, Tier] = field(default_factory=dict)
    worker_timeout_seconds: int = AUTO_WORKER_TIMEOUT_DEFAULT_SECONDS
    worker_max_turns: int = AUTO_WORKER_TURNS_DEFAULT
    resume_after_reset: bool = False
    resume_windows: int = AUTO_RESUME_WINDOWS_DEFAULT
    conserve_threshold: int = QUOTA_CONSERVE_THRESHOLD_PERCENT
    coordinator: str = "native"


def _int(table: Mapping[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    value = table.get(key, default)
    if not is_int(value, lo, hi):
        raise ValidationError(f"config auto.{key} must be an integer {lo}..{hi}")
    return value


def _bool(table: Mapping[str, Any], key: str, default: bool) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ValidationError(f"config auto.{key} must be true or false")
    return value


def _choice(table: Mapping[str, Any], key: str, default: str, choices: tuple[str, ...]) -> str:
    value = table.get(key, default)
    if value not in choices:
        raise ValidationError(f"config auto.{key} must be one of: {', '.join(choices)}")
    return str(value)


def settings_from_doc(doc: Mapping[str, Any]) -> AutoSettings:
    """Validate the `[auto]` table of a config document.

    Raises:
        ValidationError: a value out of range, naming the key and the range.
    """
    table = doc.get("auto") or {}
    if not isinstance(table, dict):
        raise ValidationError("config [auto] must be a table")
    tiers_raw = table.get("model_tiers") or {}
    if not isinstance(tiers_raw, dict):
        raise ValidationError('config [auto.model_tiers] must be a table of "vendor:model" = "tier"')
    tiers: dict[str, Tier] = {}
    for key, value in tiers_raw.items():
        vendor, _, model = str(key).partition(":")
        if vendor not in ("codex", "claude") or not model:
            raise ValidationError(
                f'config auto.model_tiers key {str(key)[:80]!r} must be "codex:MODEL" or "claude:MODEL"'
            )
        try:
            tiers[f"{vendor}:{model}"] = Tier.parse(str(value))
        except ValueError as exc:
            raise ValidationError(f"config auto.model_tiers.{key}: {exc}") from None
    return AutoSettings(
        workers=_int(table, "workers", AUTO_WORKERS_DEFAULT, 1, AUTO_WORKERS_MAX),
        quota_cache_seconds=_int(
            table,
            "quota_cache_seconds",
            QUOTA_CACHE_DEFAULT_SECONDS,
            QUOTA_CACHE_MIN_SECONDS,
            QUOTA_CACHE_MAX_SECONDS,
        ),
        model_tiers=tiers,
        resume_after_reset=_bool(table, "resume_after_reset", False),
        resume_windows=_int(table, "resume_windows", AUTO_RESUME_WINDOWS_DEFAULT, 1, AUTO_RESUME_WINDOWS_MAX),
        conserve_threshold=_int(table, "conserve_threshold", QUOTA_CONSERVE_THRESHOLD_PERCENT, 1, 100),
        coordinator=_choice(table, "coordinator", "native", ("native", "ruflo")),
    )


def load_settings(paths: XdgPaths | None = None) -> AutoSettings:
    """Read config.toml (stdlib TOML reader) and validate its `[auto]` table.

    Raises:
        ValidationError: an invalid AUTO value; ConfigError: an unreadable config file.
    """
    from ivoai.client.config.fast import read_config_fast

    return settings_from_doc(read_config_fast(paths))
