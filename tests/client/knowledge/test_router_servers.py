"""The knowledge router against three REAL ivoai servers on loopback, enrolled through the real CLI.

Faults are injected by `faultproxy.FaultProxy`, a streaming reverse proxy in front of each real
server (see its docstring): held requests stand for a server slowed past the deadline, a response
cut after forwarding stands for a response lost after the server applied a write. "Stopped" is the
real thing: the server process is terminated (and restarted afterwards).
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from ivoai.client.config.secrets import SecretsStore
from ivoai.client.connections.registry import ConnectionRegistry
from ivoai.client.knowledge.router import RouterConfig, RouterHandle, start_session_router
from ivoai.client.knowledge.upstream import open_session
from ivoai.common.paths import XdgPaths
from tests.client.knowledge.faultproxy import FaultProxy
from tests.client.knowledge.fleet import Fleet, build_fleet
from tests.conftest import CliRunner

pytestmark = pytest.mark.timeout(300)

TEAM = "team/team-ha"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    f = build_fleet(tmp_path_factory.mktemp("fleet"))
    try:
        yield f
    finally:
        f.close()


@pytest.fixture(autouse=True)
def _clean_faults(fleet: Fleet) -> Iterator[None]:
    fleet.reset_faults()
    yield
    fleet.reset_faults()


@pytest.fixture
def as_fleet_client(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point this test's environment (and so the in-process CLI) at the fleet's client home."""
    for var in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, fleet.client_env[var])


def with_stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))


def router(fleet: Fleet, *selectors: str, deadline: float = 20.0) -> RouterHandle:
    return start_session_router(
        selectors, paths=fleet.client_paths, config=RouterConfig(source_deadline_seconds=deadline)
    )


def call(handle: RouterHandle, *calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Call tools through the router with the MCP SDK client, like an agent would."""

    async def main() -> list[dict[str, Any]]:
        out = []
        async with open_session(handle.url, handle.token) as session:
            for name, args in calls:
                result = await session.call_tool(name, args)
                out.append(result.model_dump(by_alias=True, mode="json", exclude_none=True))
        return out

    try:
        return anyio.run(main)
    except BaseExceptionGroup as group:  # the SDK's task groups wrap the JSON-RPC error
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        raise leaf from None


def search(handle: RouterHandle, query: str = "quokka") -> dict[str, Any]:
    return call(handle, ("context_search", {"query": query, "limit": 10}))[0]


def statuses(result: dict[str, Any]) -> dict[str, str]:
    return {s["source"]: s["status"] for s in result["structuredContent"]["sources"]}


def test_unfiltered_reads_federate_every_source_with_attribution(fleet: Fleet) -> None:
    with router(fleet) as handle:
        assert sorted((s.id, tuple(sorted(s.kinds))) for s in handle.sources) == [
            ("docs", ("context", "memory")),
            (TEAM, ("context", "memory")),
        ]
        ctx, mem = call(
            handle, ("context_search", {"query": "quokka", "limit": 10}), ("memory_query", {"text": "quokka"})
        )
    s = ctx["structuredContent"]
    assert s["partial"] is False and ctx.get("isError") is False
    assert statuses(ctx) == {"docs": "ok", TEAM: "ok"}
    assert {r["knowledge_source"] for r in s["results"]} == {"docs", TEAM}
    assert {e["source"]: e["served_by"] for e in s["sources"]} == {"docs": "docs", TEAM: "alpha"}
    hits = mem["structuredContent"]["results"]
    assert {h["knowledge_source"] for h in hits} == {"docs", TEAM}
    assert json.loads(ctx["content"][0]["text"]) == s


def test_a_selector_restricts_to_one_source_and_passes_its_answer_through(fleet: Fleet) -> None:
    with router(fleet, "docs") as handle:
        result = search(handle)
    assert result["_meta"]["ivoai/knowledge_source"] == {"source": "docs", "served_by": "docs"}
    assert "partial" not in result["structuredContent"]  # the upstream's own, unmerged answer
    assert result["structuredContent"]["results"]


def test_knowledge_search_cli_shows_merged_attributed_results(as_fleet_client: None, cli: CliRunner) -> None:
    result = cli("knowledge", "search", "quokka", "--json")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    assert {r["knowledge_source"] for r in out["context_search"]["structuredContent"]["results"]} == {
        "docs",
        TEAM,
    }
    assert {r["knowledge_source"] for r in out["memory_query"]["structuredContent"]["results"]} == {
        "docs",
        TEAM,
    }
    human = cli("knowledge", "search", "quokka", "--limit", "5")
    assert human.code == 0, human.err
    assert "context_search: " in human.err and "memory_query: " in human.err
    assert TEAM in human.out and "docs" in human.out
    result = cli("knowledge", "search", "quokka", "--knowledge-source", "wiki")
    assert result.code == 2 and "valid choices" in result.err and "docs" in result.err


def test_knowledge_search_from_one_source_names_it_on_every_row_with_a_snippet(
    as_fleet_client: None, cli: CliRunner
) -> None:
    # One selected source: its answer is passed through and the source is only in `_meta`.
    human = cli("knowledge", "search", "quokka", "--knowledge-source", "docs")
    assert human.code == 0, human.err
    rows = [line.split("\t") for line in human.out.splitlines()]
    assert ["source", "score", "title", "snippet"] in rows
    hits = [r for r in rows if r[0] != "source"]
    assert hits and all(r[0] == "docs" for r in hits)
    assert any("quokka" in r[3].lower() for r in hits)


def test_knowledge_search_json_states_each_result_once(as_fleet_client: None, cli: CliRunner) -> None:
    for extra in ((), ("--knowledge-source", "docs")):
        result = cli("knowledge", "search", "quokka", "--json", *extra)
        assert result.code == 0, result.err
        doc = json.loads(result.out)
        assert doc["ok"] is True
        for tool in ("memory_query", "context_search"):
            assert "content" not in doc[tool]
            assert doc[tool]["structuredContent"]
        assert '\\"' not in result.out  # no result re-encoded as an escaped JSON string


def test_knowledge_status_cli_lists_sources_and_their_health(as_fleet_client: None, cli: CliRunner) -> None:
    result = cli("knowledge", "status", "--json")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    assert [s["id"] for s in out["knowledge_status"]["sources"]] == ["docs", TEAM]
    assert [m["alias"] for m in out["knowledge_status"]["sources"][1]["members"]] == ["alpha", "beta"]
    assert statuses(out["context_health"]) == {"docs": "ok", TEAM: "ok"}
    human = cli("knowledge", "status")
    assert human.code == 0 and "alpha(p10), beta(p20)" in human.out and "context_health docs: ok" in human.err


def test_a_stopped_server_leaves_reads_answered_partial_and_opens_its_breaker(fleet: Fleet) -> None:
    docs = fleet.servers["docs"]
    docs.stop()
    try:
        with router(fleet) as handle:
            results = [search(handle) for _ in range(3)]
            for result in results:
                assert result["structuredContent"]["partial"] is True
                assert statuses(result)[TEAM] == "ok"
                assert {r["knowledge_source"] for r in result["structuredContent"]["results"]} == {TEAM}
            assert statuses(results[0])["docs"] == "unavailable"
            # Two failed attempts open the breaker (the MCP client's own tools/list may be one of them).
            assert statuses(results[2])["docs"] == "breaker_open"
            seen = docs.proxy.requests
            third, status = call(handle, ("context_search", {"query": "quokka"}), ("knowledge_status", {}))
            assert statuses(third)["docs"] == "breaker_open"
            assert docs.proxy.requests == seen  # the open breaker kept the router off the network
            members = {m["alias"]: m for s in status["structuredContent"]["sources"] for m in s["members"]}
            assert members["docs"]["breaker"] == "open" and members["alpha"]["breaker"] == "closed"
    finally:
        docs.start()
        docs.wait_ready()


def test_read_failover_stays_inside_the_redundancy_group(fleet: Fleet) -> None:
    fleet.servers["alpha"].proxy.fail_prefix = "/v1/"
    with router(fleet) as handle:
        result = search(handle)
    s = result["structuredContent"]
    assert s["partial"] is False
    assert {e["source"]: e["served_by"] for e in s["sources"]} == {"docs": "docs", TEAM: "beta"}


def test_a_server_slowed_past_the_deadline_is_reported_as_a_timeout(fleet: Fleet) -> None:
    docs = fleet.servers["docs"]
    docs.proxy.hold = True
    # context_recent needs no query embedding, so the healthy source answers well inside the deadline
    # even on a loaded machine; the held one never answers.
    with router(fleet, deadline=4.0) as handle:
        (result,) = call(handle, ("context_recent", {"limit": 5}))
        held = not docs.proxy._release.is_set()
    assert held  # the answer came while docs was still holding the request
    assert result["structuredContent"]["partial"] is True
    assert statuses(result) == {"docs": "timeout", TEAM: "ok"}
    assert {r["knowledge_source"] for r in result["structuredContent"]["results"]} == {TEAM}


def test_a_wrong_credential_is_refused_by_the_server_and_never_echoed(
    fleet: Fleet, as_fleet_client: None, cli: CliRunner
) -> None:
    paths = fleet.client_paths
    docs_id = ConnectionRegistry(paths).load().server("docs").id
    store = SecretsStore(paths)
    good = store.get(docs_id)
    assert good is not None
    store.put(docs_id, "wrong-credential-value-0123456789abcdef")
    try:
        with router(fleet) as handle:
            result = search(handle)
        assert statuses(result) == {"docs": "unavailable", TEAM: "ok"}
        assert "wrong-credential-value" not in json.dumps(result)
        probe = cli("connect", "server", "test", "docs", "--json")
        assert probe.code == 1
        assert "probe failed" in probe.out + probe.err
        assert "wrong-credential-value" not in probe.out + probe.err
    finally:
        store.put(docs_id, good)


def test_a_write_with_two_possible_destinations_is_refused(fleet: Fleet) -> None:
    before = {n: s.proxy.counts["memory_write_page"] for n, s in fleet.servers.items()}
    with router(fleet) as handle, pytest.raises(MCPError) as info:
        call(handle, ("memory_write_page", {"path": "notes/x.md", "body": "# x\n"}))
    assert info.value.code == -32602
    assert "exactly one destination" in info.value.message and "docs" in info.value.message
    assert TEAM in info.value.message
    assert {n: s.proxy.counts["memory_write_page"] for n, s in fleet.servers.items()} == before


def test_a_write_whose_response_is_lost_is_not_retried_nor_sent_to_the_standby(fleet: Fleet) -> None:
    alpha, beta = fleet.servers["alpha"], fleet.servers["beta"]
    alpha.proxy.drop_response_for = {"memory_write_page"}
    before_a, before_b = alpha.proxy.counts["memory_write_page"], beta.proxy.counts["memory_write_page"]
    page = {"path": "notes/lost-response.md", "body": "# Lost\n\nwritten once\n", "knowledge_source": TEAM}
    with router(fleet) as handle:
        (result,) = call(handle, ("memory_write_page", page))
        assert result["isError"] is True
        assert "outcome uncertain" in result["content"][0]["text"]
        assert result["structuredContent"]["applied"] is None
        assert alpha.proxy.counts["memory_write_page"] == before_a + 1  # exactly one upstream write
        assert beta.proxy.counts["memory_write_page"] == before_b  # never the standby
        alpha.proxy.reset()
        (read,) = call(
            handle, ("memory_read_page", {"path": "notes/lost-response.md", "knowledge_source": TEAM})
        )
    assert read["structuredContent"]["version"] == 1  # applied once, by the one request


def test_a_write_to_a_redundancy_group_goes_to_the_primary_only(fleet: Fleet) -> None:
    alpha, beta = fleet.servers["alpha"], fleet.servers["beta"]
    before_b = beta.proxy.counts["memory_write_page"]
    with router(fleet) as handle:
        (ok,) = call(
            handle,
            ("memory_write_page", {"path": "notes/primary.md", "body": "# P\n", "knowledge_source": TEAM}),
        )
        assert ok.get("isError") is False
        assert ok["_meta"]["ivoai/knowledge_source"] == {"source": TEAM, "served_by": "alpha"}
        alpha.proxy.fail_prefix = "/v1/"
        (refused,) = call(
            handle,
            ("memory_write_page", {"path": "notes/primary.md", "body": "# P2\n", "knowledge_source": TEAM}),
        )
    assert refused["isError"] is True
    assert beta.proxy.counts["memory_write_page"] == before_b


def test_a_cross_origin_redirect_during_enrollment_is_refused_before_the_code_is_used(
    fleet: Fleet, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = fleet.servers["docs"]
    code = docs.enrollment_code()
    evil = FaultProxy(docs.url).start()
    evil.redirect_to = docs.url  # a different origin (other port) than the one the user named
    try:
        with_stdin(monkeypatch, code + "\n")
        result = cli("connect", "server", "add", "other", "--url", evil.url, "--code-stdin")
    finally:
        evil.stop()
    assert result.code == 1
    assert "another origin" in result.err and code not in result.err
    assert evil.paths == ["GET /.well-known/ivoai"]  # discovery only: the code was never posted anywhere
    with_stdin(monkeypatch, code + "\n")  # the code is unused: it still enrolls at the real origin
    result = cli("connect", "server", "add", "other", "--url", docs.url, "--code-stdin")
    assert result.code == 0, result.err


def test_a_code_replayed_after_a_failed_probe_keeps_the_first_credential(
    fleet: Fleet, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, xdg: XdgPaths
) -> None:
    docs = fleet.servers["docs"]
    code = docs.enrollment_code()
    flaky = FaultProxy(docs.url).start()
    flaky.fail_prefix = "/v1/m"  # both MCP services down; discovery and enrollment work
    try:
        add = ["connect", "server", "add", "flaky", "--url", flaky.url, "--code-stdin", "--json"]
        with_stdin(monkeypatch, code + "\n")
        result = cli(*add)
        assert result.code == 0, result.err
        view = json.loads(result.out)
        assert view["probes"]["context"].startswith("failed") and view["probes"]["memory"].startswith(
            "failed"
        )
        assert any("probe failed" in w for w in view["warnings"])
        first = SecretsStore(xdg).get(view["id"])
        assert first
        with_stdin(monkeypatch, code + "\n")
        replay = cli(*add)
        assert replay.code == 1 and "already enrolled" in replay.err
        with_stdin(monkeypatch, code + "\n")
        again = cli("connect", "server", "re-enroll", "flaky", "--code-stdin")
        assert again.code == 1 and "refused the code" in again.err
        assert SecretsStore(xdg).get(view["id"]) == first
        flaky.reset()
        test = cli("connect", "server", "test", "flaky", "--json")
        assert test.code == 0, test.out + test.err
        assert json.loads(test.out)["probes"] == {"context": "ok", "memory": "ok"}
    finally:
        flaky.stop()


@pytest.mark.parametrize(
    ("path", "answer", "message"),
    [
        ("/.well-known/ivoai", "protocol2", "speaks protocol 2"),
        ("/.well-known/ivoai", "foreign-endpoint", "own origin"),
        ("/ready", "not-ready", "not ready"),
    ],
)
def test_enrollment_checks_fail_before_the_code_is_sent(
    fleet: Fleet, cli: CliRunner, monkeypatch: pytest.MonkeyPatch, path: str, answer: str, message: str
) -> None:
    docs = fleet.servers["docs"]
    discovery = httpx2.get(docs.url + "/.well-known/ivoai", trust_env=False).json()
    answers: dict[str, tuple[int, Any]] = {
        "protocol2": (200, {**discovery, "protocol_version": 2}),
        "foreign-endpoint": (200, {**discovery, "context_mcp_endpoint": "https://elsewhere.example/mcp"}),
        "not-ready": (503, {"status": "not_ready"}),
    }
    code = docs.enrollment_code()
    proxy = FaultProxy(docs.url).start()
    proxy.override = {path: answers[answer]}
    try:
        with_stdin(monkeypatch, code + "\n")
        result = cli("connect", "server", "add", "checked", "--url", proxy.url, "--code-stdin")
        assert result.code == 1
        assert message in result.err
        assert "POST /v1/enroll" not in proxy.paths and code not in result.err
        # The code was not consumed: the same code still enrolls once the server is right.
        proxy.override = {}
        with_stdin(monkeypatch, code + "\n")
        result = cli("connect", "server", "add", "checked", "--url", proxy.url, "--code-stdin")
        assert result.code == 0, result.err
    finally:
        proxy.stop()


def test_a_ready_degraded_server_is_enrolled_with_a_warning(
    fleet: Fleet, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = fleet.servers["docs"]
    code = docs.enrollment_code()
    proxy = FaultProxy(docs.url).start()
    proxy.override = {"/ready": (200, {"status": "ready_degraded"})}
    try:
        with_stdin(monkeypatch, code + "\n")
        result = cli("connect", "server", "add", "degraded", "--url", proxy.url, "--code-stdin", "--json")
    finally:
        proxy.stop()
    assert result.code == 0, result.err
    assert any("ready_degraded" in w for w in json.loads(result.out)["warnings"])


def test_each_credential_reaches_only_its_own_server(fleet: Fleet) -> None:
    store = SecretsStore(fleet.client_paths)
    registry = ConnectionRegistry(fleet.client_paths).load()
    for server in fleet.servers.values():
        server.proxy.authorizations.clear()
    fleet.servers["alpha"].proxy.fail_prefix = "/v1/"  # so the standby is used too
    with router(fleet) as handle:
        call(handle, ("context_search", {"query": "quokka"}), ("memory_recent", {}))
    for name, server in fleet.servers.items():
        own = store.get(registry.server(name).id)
        assert server.proxy.authorizations <= {f"Bearer {own}"}, name
    assert all(s.proxy.authorizations for n, s in fleet.servers.items() if n != "alpha")


def test_an_upstream_redirect_to_another_origin_is_not_followed_with_the_credential(fleet: Fleet) -> None:
    docs = fleet.servers["docs"]
    catcher = FaultProxy(docs.url).start()  # another origin that would love to receive the credential
    docs.proxy.redirect_to = catcher.url
    docs.proxy.redirect_paths = {"/v1/mcp/context"}
    try:
        with router(fleet) as handle:
            result = search(handle)
    finally:
        catcher.stop()
    assert statuses(result) == {"docs": "unavailable", TEAM: "ok"}
    assert catcher.paths == [] and catcher.authorizations == set()


def test_reads_after_a_server_restart_are_answered_on_a_fresh_session(fleet: Fleet) -> None:
    docs = fleet.servers["docs"]
    with router(fleet) as handle:
        assert statuses(search(handle)) == {"docs": "ok", TEAM: "ok"}  # sessions are open now
        docs.stop()
        docs.start()
        docs.wait_ready()
        after = search(handle)
    assert statuses(after) == {"docs": "ok", TEAM: "ok"}
    assert after["structuredContent"]["partial"] is False


def test_a_read_failing_once_on_an_open_session_is_retried_on_a_fresh_one_but_a_write_is_not(
    fleet: Fleet,
) -> None:
    docs = fleet.servers["docs"]
    with router(fleet) as handle:
        assert statuses(search(handle)) == {"docs": "ok", TEAM: "ok"}
        docs.proxy.fail_next_tool_calls = 1
        after = search(handle)
        assert statuses(after) == {"docs": "ok", TEAM: "ok"} and docs.proxy.fail_next_tool_calls == 0
        before = docs.proxy.counts["memory_write_page"]
        docs.proxy.fail_next_tool_calls = 1
        (write,) = call(
            handle,
            ("memory_write_page", {"path": "notes/once.md", "body": "# once\n", "knowledge_source": "docs"}),
        )
    assert write["isError"] is True and "outcome uncertain" in write["content"][0]["text"]
    assert docs.proxy.counts["memory_write_page"] == before  # the refused attempt was the only one


def test_with_one_memory_source_a_write_needs_no_destination(fleet: Fleet) -> None:
    docs = fleet.servers["docs"]
    before = docs.proxy.counts["memory_write_page"]
    with router(fleet, "docs") as handle:
        (written,) = call(handle, ("memory_write_page", {"path": "notes/implicit.md", "body": "# I\n"}))
    assert written.get("isError") is False
    assert written["_meta"]["ivoai/knowledge_source"] == {"source": "docs", "served_by": "docs"}
    assert written["structuredContent"]["path"] == "notes/implicit.md"
    assert docs.proxy.counts["memory_write_page"] == before + 1
