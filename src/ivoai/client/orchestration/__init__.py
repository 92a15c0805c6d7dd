"""AUTO orchestration: quota ledger, limit classifier, scheduler, advisory workers, orchestrator MCP.

See docs/orchestration.md. The package's names are imported lazily (PEP 562) so that the
statusline command, which Claude runs on every refresh, loads only what it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ivoai.client.orchestration._commands import check_plan_file, ledger_view, quota_report
    from ivoai.client.orchestration._ledger import QuotaLedger
    from ivoai.client.orchestration._plan import validate_plan
    from ivoai.client.orchestration._scheduler import PlanReport, evaluate_plan
    from ivoai.client.orchestration._scoring import Tier
    from ivoai.client.orchestration._settings import AutoSettings, load_settings

_EXPORTS = {
    "AutoSettings": "_settings",
    "PlanReport": "_scheduler",
    "QuotaLedger": "_ledger",
    "Tier": "_scoring",
    "check_plan_file": "_commands",
    "evaluate_plan": "_scheduler",
    "ledger_view": "_commands",
    "load_settings": "_settings",
    "quota_report": "_commands",
    "validate_plan": "_plan",
}

__all__ = [
    "AutoSettings",
    "PlanReport",
    "QuotaLedger",
    "Tier",
    "check_plan_file",
    "evaluate_plan",
    "ledger_view",
    "load_settings",
    "quota_report",
    "validate_plan",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
