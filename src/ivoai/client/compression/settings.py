"""Which compression provider the user requested, and who chose it (seed 003, "Configuração e migração").

`compression.provider` is `caveman`, `headroom` or `direct`. When the key is missing ivoai resolves
`caveman` and records `compression.source = default` on a new install, or `migration` when it
normalizes a legacy config. A persisted override is `explicit` and never replaced. v0.6.0 wrote
`provider = "headroom"` without saying whether the operator chose it, so a provider value with no
recorded source is preserved as it is and recorded as `migration`. Unknown keys are left alone.

Import-light (no tomlkit or pydantic): the launcher reads the raw tomllib document.
"""

from __future__ import annotations

from ivoai.client.compression.decision import CompressionSetting
from ivoai.client.compression.errors import CompressionSettingError

__all__ = ["DEFAULT_PROVIDER", "PROVIDERS", "SOURCES", "CompressionSetting", "normalize", "resolve_setting"]

PROVIDERS = ("caveman", "headroom", "direct")
SOURCES = ("default", "migration", "explicit")
DEFAULT_PROVIDER = "caveman"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def _table(doc: Mapping[str, object]) -> Mapping[str, object]:
    table = doc.get("compression")
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise CompressionSettingError("config.toml: `compression` must be a table")
    return table


def resolve_setting(doc: Mapping[str, object], *, legacy: bool = False) -> CompressionSetting:
    """The requested provider for a raw config document (what a launch uses).

    `legacy` says the document predates seed 003 (it is being normalized, not freshly created).

    Raises:
        CompressionSettingError: a value outside the allowed set (the message names key and values).
    """
    table = _table(doc)
    provider = table.get("provider")
    source = table.get("source")
    if source is not None and source not in SOURCES:
        raise CompressionSettingError(
            f"config.toml: compression.source must be one of {', '.join(SOURCES)} (it is recorded by ivoai)"
        )
    if provider is None:
        if source == "explicit":
            source = None  # an explicit record without its value cannot stand; treat as missing
        return CompressionSetting(DEFAULT_PROVIDER, str(source or ("migration" if legacy else "default")))
    if provider not in PROVIDERS:
        raise CompressionSettingError(
            f"config.toml: compression.provider must be one of {', '.join(PROVIDERS)}"
        )
    return CompressionSetting(str(provider), str(source or "migration"))


def normalize(doc: Mapping[str, object], *, legacy: bool) -> dict[str, str]:
    """The `compression.*` keys a config normalization must write; {} when nothing changes.

    Missing provider -> caveman with source default (new install) or migration (legacy); a provider
    without a source (v0.6.0 materialized `headroom`) is kept and recorded as migration; an
    explicit choice is never replaced.
    """
    table = _table(doc)
    setting = resolve_setting(doc, legacy=legacy)
    changes: dict[str, str] = {}
    if table.get("provider") != setting.provider:
        changes["compression.provider"] = setting.provider
    if table.get("source") != setting.source:
        changes["compression.source"] = setting.source
    return changes
