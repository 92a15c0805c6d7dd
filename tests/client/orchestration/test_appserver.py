"""Codex over the real `codex app-server` (no account) and a logged-in stand-in (documented schema)."""

from __future__ import annotations

import filecmp
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest

from ivoai.client.orchestration._appserver import AUTH_REQUIRED, RpcError, open_app_server
from ivoai.client.orchestration._probes import CatalogueCache, probe_vendor
from ivoai.client.orchestration._runtime import Runtime
from ivoai.client.orchestration._settings import AutoSettings
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.plans import CODEX_SCHEMA
from tests.client.orchestration.support import codex_standin, fixture, real_clients_on_path, standin_requests
from tests.conftest import tool_path


def _schema(name: str) -> jsonschema.Draft7Validator:
    import json

    return jsonschema.Draft7Validator(json.loads((CODEX_SCHEMA / name).read_text()))


def test_the_schema_fixtures_are_what_the_installed_codex_generates(tmp_path: Path) -> None:
    out = tmp_path / "schema"
    subprocess.run(
        [str(tool_path("codex")), "app-server", "generate-json-schema", "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    for fixture_file in sorted(CODEX_SCHEMA.iterdir()):
        generated = next(out.rglob(fixture_file.name))
        assert filecmp.cmp(generated, fixture_file, shallow=False), (
            f"{fixture_file.name} drifted; regenerate it"
        )


def test_real_app_server_handshake_catalogue_and_unauthenticated_answers(xdg: XdgPaths) -> None:
    with open_app_server(str(tool_path("codex")), dict(os.environ)) as session:
        assert session.version == "0.171.0"
        account = session.request("account/read", {})
        _schema("GetAccountResponse.json").validate(account)
        assert account["account"] is None and account["requiresOpenaiAuth"] is True
        with pytest.raises(RpcError) as info:
            session.request("account/rateLimits/read")
        assert info.value.code == AUTH_REQUIRED
        models = session.request("model/list", {"includeHidden": True})
        _schema("ModelListResponse.json").validate(models)
        assert any(m["isDefault"] for m in models["data"])


def test_probe_of_the_real_codex_reports_logged_out_and_unknown_quota(
    xdg: XdgPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_clients_on_path(monkeypatch)
    probe = probe_vendor("codex", dict(os.environ), CatalogueCache(xdg))
    assert probe.facts.worker_capable and probe.facts.auth == "unauthenticated"
    assert probe.facts.client_version == "0.171.0"
    assert probe.quota is not None and probe.quota.state == "unknown" and probe.quota.windows == ()
    assert probe.quota.hard_limit is None  # not logged in is not "exhausted"
    assert probe.facts.catalogue is not None and probe.facts.catalogue.get("gpt-6.2-sol") is not None
    cached = CatalogueCache(xdg).get("codex", "0.171.0")
    assert cached is not None and len(cached.models) == len(probe.facts.catalogue.models)


def test_a_logged_in_read_is_normalized_and_updates_are_merged(xdg: XdgPaths) -> None:
    home = codex_standin(
        xdg,
        {
            "account": fixture("codex_account_chatgpt.json"),
            "rate_limits": fixture("codex_rate_limits_ok.json"),
            "updates": [fixture("codex_rate_limits_updated.json")],
            "model_list": fixture("codex_model_list.json"),
        },
    )
    probe = probe_vendor("codex", dict(os.environ), CatalogueCache(xdg), now=1796140000.0)
    assert probe.facts.auth == "authenticated"
    q = probe.quota
    assert q is not None and q.state == "known" and q.plan_type == "pro"
    assert q.window("session") is not None and q.window("session").used_percent == 55.0  # type: ignore[union-attr]
    assert q.blocked_models() == {"gpt-6.2-astra"}
    methods = [r.get("method") for r in standin_requests(home)]
    assert methods[:4] == ["initialize", "initialized", "account/read", "account/rateLimits/read"]


def test_the_ledger_cache_avoids_asking_again_within_the_ttl(xdg: XdgPaths) -> None:
    home = codex_standin(
        xdg,
        {
            "account": fixture("codex_account_chatgpt.json"),
            "rate_limits": fixture("codex_rate_limits_legacy.json"),
            "model_list": fixture("codex_model_list.json"),
        },
    )
    runtime = Runtime(AutoSettings(), paths=xdg)
    first = runtime.current(vendors=("codex",))
    assert first.quota.get("codex").auth == "authenticated"
    starts = sum(1 for r in standin_requests(home) if r.get("method") == "initialize")
    runtime.current(vendors=("codex",))
    assert sum(1 for r in standin_requests(home) if r.get("method") == "initialize") == starts
    runtime.current(vendors=("codex",), refresh=True)
    assert sum(1 for r in standin_requests(home) if r.get("method") == "initialize") == starts + 1


def test_a_confirmed_exhausted_read_becomes_a_hard_limit_in_the_ledger(xdg: XdgPaths) -> None:
    codex_standin(
        xdg,
        {
            "account": fixture("codex_account_chatgpt.json"),
            "rate_limits": fixture("codex_rate_limits_exhausted.json"),
            "model_list": fixture("codex_model_list.json"),
        },
    )
    facts = Runtime(AutoSettings(), paths=xdg).current(vendors=("codex",), refresh=True)
    hard = facts.quota.get("codex").hard_limit
    assert hard is not None and hard.confirmed


def test_an_app_server_that_cannot_answer_leaves_quota_unknown_never_exhausted(xdg: XdgPaths) -> None:
    bindir = xdg.data / "bin"
    bindir.mkdir(parents=True, mode=0o700)
    broken = bindir / "codex"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    facts = Runtime(AutoSettings(), paths=xdg).current(vendors=("codex",), refresh=True)
    q = facts.quota.get("codex")
    assert q.hard_limit is None and q.windows == () and q.state == "error" and q.error
    assert facts.providers[0].worker_capable is False
