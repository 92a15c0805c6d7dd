"""`ivoai knowledge search` when no source answers: a failing exit and each source's real cause.

The sources are enrolled locally (registry + secrets) at loopback ports nothing listens on, so every
connection is really refused; the router, its breakers and the MCP client are the real ones.
"""

from __future__ import annotations

import json

from ivoai.common.paths import XdgPaths
from tests.client.knowledge.test_router_local import _closed_port, _enroll_locally, _profile
from tests.conftest import CliRunner


def test_search_with_every_source_down_exits_1_and_reports_each_connection_error(
    cli: CliRunner, xdg: XdgPaths
) -> None:
    _enroll_locally(xdg, _profile("alpha", _closed_port()), _profile("beta", _closed_port()))
    result = cli("knowledge", "search", "vpn", "--json")
    assert result.code == 1, result.out
    doc = json.loads(result.out)
    assert doc["ok"] is False
    for tool in ("memory_query", "context_search"):
        entries = {s["source"]: s for s in doc[tool]["structuredContent"]["sources"]}
        assert set(entries) == {"alpha", "beta"}
        for entry in entries.values():
            # the first cause, not just the breaker it tripped
            assert "could not connect" in entry["error"], entry
    human = cli("knowledge", "search", "vpn")
    assert human.code == 1
    assert "no source answered" in human.err
    assert "alpha: " in human.err and "could not connect" in human.err


def test_search_with_the_only_source_down_exits_1_naming_the_cause(cli: CliRunner, xdg: XdgPaths) -> None:
    _enroll_locally(xdg, _profile("alpha", _closed_port()))
    result = cli("knowledge", "search", "vpn")
    assert result.code == 1
    lines = [line for line in result.err.splitlines() if "no source answered" in line]
    assert len(lines) == 2  # memory_query and context_search
    for line in lines:
        assert ": no source answered: alpha: could not connect: " in line, line
        assert line.count("alpha") == 1  # the cause once, not wrapped in the router's sentence


def test_search_json_carries_no_text_copy_of_the_structured_result(cli: CliRunner, xdg: XdgPaths) -> None:
    _enroll_locally(xdg, _profile("alpha", _closed_port()), _profile("beta", _closed_port()))
    doc = json.loads(cli("knowledge", "search", "vpn", "--json").out)
    for tool in ("memory_query", "context_search"):
        assert "content" not in doc[tool]
        assert doc[tool]["structuredContent"]["partial"] is True
