"""`ivoai auto plan --check` (offline, exact --json contract) and `ivoai quota`."""

from __future__ import annotations

import json
from pathlib import Path

from ivoai.client.orchestration._probes import CatalogueCache
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.plans import (
    claude_catalogue_fixture,
    codex_catalogue_fixture,
    plan,
    task,
    twelve_task_plan,
)
from tests.client.orchestration.support import codex_standin, fixture
from tests.conftest import CliRunner

TASK_KEYS = {"id", "score", "tier", "benefit", "overhead", "delegated", "reason", "profile"}


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    return path


def _seed_catalogues(xdg: XdgPaths) -> None:
    cache = CatalogueCache(xdg)
    cache.put(codex_catalogue_fixture())
    cache.put(claude_catalogue_fixture())


def test_plan_check_json_has_the_contract_fields_and_exit_0(
    cli: CliRunner, xdg: XdgPaths, tmp_path: Path
) -> None:
    _seed_catalogues(xdg)
    result = cli("auto", "plan", "--check", str(_write(tmp_path, twelve_task_plan())), "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["valid"] is True and doc["errors"] == [] and len(doc["tasks"]) == 12
    assert all(set(t) >= TASK_KEYS for t in doc["tasks"])
    scan = doc["tasks"][0]
    assert scan["profile"]["vendor"] in ("codex", "claude") and scan["profile"]["model"]


def test_plan_check_without_cached_catalogues_says_why_no_profile(cli: CliRunner, tmp_path: Path) -> None:
    result = cli("auto", "plan", "--check", str(_write(tmp_path, twelve_task_plan())), "--json")
    assert result.code == 0
    scan = json.loads(result.out)["tasks"][0]
    assert scan["profile"] is None and "no cached codex catalogue" in scan["reason"]


def test_an_invalid_plan_exits_1_and_lists_every_error_with_its_field(cli: CliRunner, tmp_path: Path) -> None:
    doc = plan(*[task(f"t{i}") for i in range(13)])
    doc["tasks"][0]["shell"] = "bash"
    result = cli("auto", "plan", "--check", str(_write(tmp_path, doc)), "--json")
    assert result.code == 1
    errors = {e["field"]: e["message"] for e in json.loads(result.out)["errors"]}
    assert errors["tasks"] == "must hold 1-12 tasks (has 13)"
    assert errors["tasks[0].shell"].startswith("forbidden field")
    human = cli("auto", "plan", "--check", str(_write(tmp_path, doc)))
    assert human.code == 1 and "ivoai: plan error: tasks: must hold 1-12 tasks (has 13)" in human.err


def test_a_plan_that_is_not_json_names_the_line_and_column(cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text('{"objective": "x",\n  "tasks": [,]}')
    result = cli("auto", "plan", "--check", str(path))
    assert result.code == 1 and "invalid JSON at line 2, column 13" in result.err


def test_quota_json_shows_windows_with_pace_from_a_logged_in_codex(cli: CliRunner, xdg: XdgPaths) -> None:
    codex_standin(
        xdg,
        {
            "account": fixture("codex_account_chatgpt.json"),
            "rate_limits": fixture("codex_rate_limits_ok.json"),
            "model_list": fixture("codex_model_list.json"),
        },
    )
    result = cli("quota", "--json", "--refresh")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    codex = next(v for v in doc["vendors"] if v["vendor"] == "codex")
    assert codex["auth"] == "authenticated" and codex["client"]["version"] == "0.171.0"
    kinds = {(w["kind"], w["model"]) for w in codex["windows"]}
    assert ("session", None) in kinds and ("weekly", "gpt-6.2-astra") in kinds
    for w in codex["windows"]:
        assert {"used_percent", "remaining_percent", "elapsed_percent", "pace_delta", "stale"} <= set(w)


def test_quota_with_nothing_known_says_unknown_never_blocks(cli: CliRunner) -> None:
    result = cli("quota")
    assert result.code == 0
    assert "unknown never blocks a launch" in result.err
