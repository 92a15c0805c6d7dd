"""The Claude -> Codex transcript import: the request shape against the real Codex schema."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema

from ivoai.client.orchestration._failover import import_request, import_supported, schema_has_import
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.plans import CODEX_SCHEMA
from tests.conftest import tool_path


def test_the_import_request_matches_the_installed_codex_schema() -> None:
    schema = json.loads((CODEX_SCHEMA / "ExternalAgentConfigImportParams.json").read_text())
    request = import_request("/home/u/.claude/projects/-w/0f.jsonl", "/w", "chain ses_x")
    jsonschema.Draft7Validator(schema).validate(request)
    [item] = request["migrationItems"]
    assert item["itemType"] == "SESSIONS" and item["details"]["sessions"][0]["path"].endswith("0f.jsonl")


def test_the_real_codex_says_it_supports_the_import_and_the_answer_is_cached(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    codex = str(tool_path("codex"))
    assert import_supported(codex, "0.171.0", dict(os.environ), xdg) is True
    cached = xdg.cache / "catalogues" / "codex-0.171.0.import.json"
    assert json.loads(cached.read_text())["supported"] is True
    assert oct(cached.stat().st_mode & 0o777) == "0o600"
    assert import_supported("/nonexistent/codex", "0.171.0", {}, xdg) is True  # from the cache, no run
    assert import_supported("/nonexistent/codex", "9.9.9", {}, xdg) is False  # cannot check: no import
    assert not schema_has_import(str(tmp_path))  # an empty directory is not a schema with the import
