"""Advisory workers: the real `codex exec` / `claude -p` against a scripted model service, and
stand-ins where a logged-in account is needed (rate-limit events) or a misbehaving client is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from ivoai.client.orchestration._classify import LimitKind, LimitVerdict
from ivoai.client.orchestration._quota import HardLimit, VendorQuota
from ivoai.client.orchestration._scoring import Tier
from ivoai.client.orchestration._worker import WorkerControl, run_worker
from ivoai.client.orchestration._worker_spec import KnowledgeAccess
from ivoai.client.workingcontext import ArtifactStore, EvidenceRole, WorkerStatus
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.model_stub import Reply, model_stub
from tests.client.orchestration.support import codex_standin, install, real_clients_on_path
from tests.client.orchestration.workers import (
    SESSION,
    alive,
    git_tree,
    spec,
    standin_log,
    wait_for,
    worker_io,
)
from tests.conftest import tool_path

ANSWER = json.dumps(
    {
        "summary": "parse() returns its input unchanged",
        "findings": ["parser.py:2 no validation"],
        "state_delta": {
            "changed_files": [],
            "tests": "not_run",
            "facts": ["parse is identity"],
            "next_steps": ["add validation"],
            "open_questions": [],
            "uncertain_effects": [],
        },
    }
)


def test_real_codex_exec_worker_succeeds_with_evidence_stored_first(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_clients_on_path(monkeypatch)
    tree = git_tree(tmp_path / "repo")
    with model_stub(default_text=ANSWER) as stub:
        s = spec(tree, extra_args=stub.codex_args(), extra_env=stub.codex_env(), tier=Tier.STRONG)
        report = run_worker(s, worker_io(xdg, tmp_path), WorkerControl())
    assert report.status is WorkerStatus.SUCCEEDED, report.result.errors
    assert report.result.summary == "parse() returns its input unchanged"
    assert report.result.findings == ["parser.py:2 no validation"]
    assert report.result.state_delta.next_steps == ["add validation"]
    assert report.tree_check == "unchanged" and report.violations == []
    assert report.usage["input_tokens"] == 120 and report.models_ran == ["gpt-6.2-sol"]
    roles = {r.role for r in report.result.refs}
    assert roles == {EvidenceRole.LOG, EvidenceRole.OUTPUT}
    store = ArtifactStore()
    out = next(r for r in report.result.refs if r.role is EvidenceRole.OUTPUT)
    assert store.read(out.ref.id, session_id=SESSION)[1] == ANSWER.encode()
    log = next(r for r in report.result.refs if r.role is EvidenceRole.LOG)
    events = [json.loads(line) for line in store.read(log.ref.id, session_id=SESSION)[1].splitlines()]
    assert events[0]["type"] == "thread.started" and events[-1]["type"] == "turn.completed"
    body = stub.requests[0]["body"]
    assert body["model"] == "gpt-6.2-sol" and body["reasoning"]["effort"] == "low"
    assert "Scan parser.py" in json.dumps(body["input"])
    assert body["text"]["format"]["type"] == "json_schema"  # --output-schema reached the model
    doc = report.to_dict()
    assert len(json.dumps(doc).encode()) <= 64 * 1024 and doc["projection"]["mode"] == "verbatim"


def test_real_claude_worker_reports_the_model_that_ran_and_its_cost(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_clients_on_path(monkeypatch)
    tree = git_tree(tmp_path / "repo")
    with model_stub(default_text=ANSWER) as stub:
        s = spec(tree, vendor="claude", model="sonnet", extra_env=stub.claude_env())
        report = run_worker(s, worker_io(xdg, tmp_path), WorkerControl())
    assert report.status is WorkerStatus.SUCCEEDED, report.result.errors
    assert report.result.findings == ["parser.py:2 no validation"]
    assert report.models_ran and report.models_ran[0].startswith("claude-sonnet")
    assert report.cost_usd is not None and report.cost_usd > 0
    request = next(r for r in stub.requests if r["path"].startswith("/v1/messages"))
    tools = {t["name"] for t in request["body"].get("tools", [])}
    assert tools <= {"Read", "Grep", "Glob"}  # no write or shell tool reaches the model


def test_a_failing_model_service_makes_a_failed_result_with_explicit_errors(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_clients_on_path(monkeypatch)
    tree = git_tree(tmp_path / "repo")
    with model_stub(replies=[Reply("error500")]) as stub:
        s = spec(tree, extra_args=stub.codex_args(), extra_env=stub.codex_env())
        report = run_worker(s, worker_io(xdg, tmp_path), WorkerControl())
    assert report.status is WorkerStatus.FAILED and report.result.errors
    assert report.exit_code != 0
    assert EvidenceRole.LOG in {r.role for r in report.result.refs}  # the evidence is kept


def test_a_real_codex_usage_limit_message_is_rechecked_and_not_trusted_alone(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_clients_on_path(monkeypatch)
    tree = git_tree(tmp_path / "repo")
    asked: list[str] = []

    def reprobe(vendor: str) -> VendorQuota:
        asked.append(vendor)
        return VendorQuota(vendor, auth="authenticated", state="known", observed_at=1.0, stale=False)

    with model_stub(replies=[Reply("usage_limit")]) as stub:
        s = spec(tree, extra_args=stub.codex_args(), extra_env=stub.codex_env())
        report = run_worker(s, worker_io(xdg, tmp_path, reprobe=reprobe), WorkerControl())
    assert asked == ["codex"]
    assert (
        report.limit is not None and report.limit.kind is LimitKind.TRANSIENT and not report.limit.confirmed
    )
    assert any("usage limit" in e for e in report.result.errors)


def test_a_usage_limit_confirmed_by_a_fresh_read_is_a_hard_limit(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_clients_on_path(monkeypatch)
    tree = git_tree(tmp_path / "repo")
    limited = VendorQuota(
        "codex",
        auth="authenticated",
        state="known",
        observed_at=1.0,
        stale=False,
        hard_limit=HardLimit("codex", True, "codex_app_server", 1.0, 4102444800.0, "rate_limit_reached"),
    )
    seen: list[LimitVerdict] = []
    with model_stub(replies=[Reply("usage_limit")]) as stub:
        s = spec(tree, extra_args=stub.codex_args(), extra_env=stub.codex_env())
        io = worker_io(
            xdg, tmp_path, reprobe=lambda v: limited, on_limit=lambda v, verdict, infos: seen.append(verdict)
        )
        report = run_worker(s, io, WorkerControl())
    assert report.limit is not None and report.limit.kind is LimitKind.HARD_LIMIT and report.limit.confirmed
    assert seen and seen[0].confirmed


def test_claude_rate_limit_events_reach_the_ledger_callback_and_a_rejection_is_confirmed(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    install(xdg, "claude", "claude_standin.py")
    home = Path(os.environ["HOME"]) / ".claude"
    home.mkdir()
    info = {"status": "rejected", "resetsAt": 4102444800, "rateLimitType": "five_hour", "utilization": 1.0}
    events = [
        {
            "type": "system",
            "subtype": "init",
            "model": "claude-sonnet-5",
            "session_id": "s",
            "tools": ["Read"],
        },
        {"type": "rate_limit_event", "rate_limit_info": info, "uuid": "u", "session_id": "s"},
        {
            "type": "result",
            "subtype": "error_during_execution",
            "is_error": True,
            "api_error_status": 429,
            "result": "Claude AI usage limit reached",
            "session_id": "s",
            "total_cost_usd": 0.0,
            "usage": {},
            "modelUsage": {},
            "permission_denials": [],
            "num_turns": 0,
        },
    ]
    (home / "ivoai-standin.json").write_text(json.dumps({"logged_in": True, "events": events, "exit": 1}))
    recorded: list[tuple[LimitVerdict, list[dict[str, object]]]] = []
    io = worker_io(xdg, tmp_path, on_limit=lambda v, verdict, infos: recorded.append((verdict, infos)))
    report = run_worker(spec(git_tree(tmp_path / "repo"), vendor="claude"), io, WorkerControl())
    assert report.status is WorkerStatus.FAILED
    assert report.limit is not None and report.limit.kind is LimitKind.HARD_LIMIT and report.limit.confirmed
    assert report.limit.resets_at == 4102444800.0
    assert recorded and recorded[0][1] == [info]
    [run] = standin_log(home, "ivoai-standin-runs.jsonl")
    argv = run["argv"]
    assert argv[argv.index("--tools") + 1] == "Read,Grep,Glob" and "--strict-mcp-config" in argv
    assert argv[argv.index("--permission-mode") + 1] == "dontAsk"


def test_a_worker_that_edits_a_file_is_flagged_as_a_violation(xdg: XdgPaths, tmp_path: Path) -> None:
    tree = git_tree(tmp_path / "repo")
    events = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": ANSWER}},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}},
    ]
    codex_standin(xdg, {"exec": {"events": events, "write": "sneaky.txt"}})
    report = run_worker(spec(tree), worker_io(xdg, tmp_path), WorkerControl())
    assert report.tree_check == "changed" and report.status is WorkerStatus.FAILED
    assert "sneaky.txt" in report.violations[0]
    assert report.result.errors[0].startswith("read-only violation")


def test_worker_environment_is_minimal_and_never_carries_payg_keys(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-" + "x" * 40)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-" + "y" * 40)
    monkeypatch.setenv("MY_PRIVATE_VAR", "1")
    home = codex_standin(
        xdg, {"exec": {"events": [{"type": "turn.completed", "usage": {}}], "last_message": ANSWER}}
    )
    knowledge = KnowledgeAccess(
        "http://127.0.0.1:9/mcp", "tok-" + "z" * 20, ("memory_query", "context_search")
    )
    report = run_worker(
        spec(git_tree(tmp_path / "repo"), knowledge=knowledge), worker_io(xdg, tmp_path), WorkerControl()
    )
    assert report.status is WorkerStatus.SUCCEEDED, report.result.errors
    [run] = [r for r in standin_log(home, "ivoai-standin-requests.jsonl") if "exec_argv" in r]
    keys = set(run["env_keys"])
    assert not keys & {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_PRIVATE_VAR"}
    assert "IVOAI_KNOWLEDGE_TOKEN" in keys
    argv = run["exec_argv"]
    assert "tok-" not in " ".join(argv)  # the capability is never in argv
    assert argv[argv.index("--sandbox") : argv.index("--sandbox") + 2] == ["--sandbox", "read-only"]
    assert 'mcp_servers.ivoai-knowledge.enabled_tools=["context_search", "memory_query"]' in argv


def _holding_worker(xdg: XdgPaths, tmp_path: Path, **exec_spec: object) -> tuple[Path, Path]:
    tree = git_tree(tmp_path / "repo")
    home = codex_standin(
        xdg, {"exec": {"events": [{"type": "thread.started", "thread_id": "t"}], "hold": True, **exec_spec}}
    )
    return tree, home


def test_cancel_reaps_the_whole_process_group(xdg: XdgPaths, tmp_path: Path) -> None:
    tree, home = _holding_worker(xdg, tmp_path, spawn_child=True)
    control = WorkerControl()
    result: list[object] = []
    thread = threading.Thread(
        target=lambda: result.append(run_worker(spec(tree), worker_io(xdg, tmp_path), control))
    )
    thread.start()
    wait_for(lambda: any("grandchild" in r for r in standin_log(home, "ivoai-standin-requests.jsonl")))
    grandchild = next(
        r["grandchild"] for r in standin_log(home, "ivoai-standin-requests.jsonl") if "grandchild" in r
    )
    assert control.pid is not None and alive(control.pid) and alive(grandchild)
    control.cancel.set()
    thread.join(30)
    assert not thread.is_alive()
    report = result[0]
    assert report.status is WorkerStatus.CANCELLED  # type: ignore[attr-defined]
    assert not alive(control.pid) and not alive(grandchild)


def test_a_worker_killed_mid_output_leaves_one_complete_artifact(xdg: XdgPaths, tmp_path: Path) -> None:
    tree, home = _holding_worker(xdg, tmp_path)
    control = WorkerControl()
    result: list[object] = []
    thread = threading.Thread(
        target=lambda: result.append(run_worker(spec(tree), worker_io(xdg, tmp_path), control))
    )
    thread.start()
    wait_for(lambda: control.pid is not None)
    spool_file = tmp_path / "spool" / "wrk_1" / "events.jsonl"
    wait_for(lambda: spool_file.exists() and spool_file.stat().st_size > 20_000)
    assert control.pid is not None
    os.kill(control.pid, signal.SIGKILL)  # dies mid-write, from outside ivoai
    thread.join(30)
    report = result[0]
    assert report.status is WorkerStatus.FAILED and report.end_reason == "signalled"  # type: ignore[attr-defined]
    [log] = [r for r in report.result.refs if r.role is EvidenceRole.LOG]  # type: ignore[attr-defined]
    ref, data = ArtifactStore().read(log.ref.id, session_id=SESSION)  # digest verified
    assert ref.state.value == "complete" and len(data) == ref.size > 20_000
    assert data.startswith(b'{"type": "thread.started"')
    listing = ArtifactStore().list(session_id=SESSION)
    assert len(listing.refs) == len(report.result.refs)  # type: ignore[attr-defined]
    assert not (xdg.working_context_dir / "staging").exists() or not list(
        (xdg.working_context_dir / "staging").iterdir()
    )


def test_the_wall_clock_limit_ends_a_worker_as_timed_out(xdg: XdgPaths, tmp_path: Path) -> None:
    tree, _ = _holding_worker(xdg, tmp_path)
    report = run_worker(spec(tree, timeout_seconds=0.5), worker_io(xdg, tmp_path), WorkerControl())
    assert report.status is WorkerStatus.TIMED_OUT and "wall-clock" in report.result.errors[0]


def test_the_turn_limit_ends_a_runaway_worker(xdg: XdgPaths, tmp_path: Path) -> None:
    tree = git_tree(tmp_path / "repo")
    calls = [
        {"type": "item.completed", "item": {"id": f"c{i}", "type": "command_execution", "command": "ls"}}
        for i in range(50)
    ]
    codex_standin(xdg, {"exec": {"events": [{"type": "turn.started"}, *calls], "hold": True}})
    report = run_worker(spec(tree, max_turns=5), worker_io(xdg, tmp_path), WorkerControl())
    assert report.status is WorkerStatus.FAILED and "turn limit" in report.result.errors[0]


def test_the_flags_ivoai_passes_exist_in_the_installed_clients() -> None:
    codex = subprocess.run(
        [str(tool_path("codex")), "exec", "--help"], capture_output=True, text=True, timeout=60
    )
    for flag in (
        "--json",
        "--ephemeral",
        "--sandbox",
        "--skip-git-repo-check",
        "--ignore-user-config",
        "--output-schema",
        "--output-last-message",
        "--cd",
        "--model",
        "--config",
    ):
        assert flag in codex.stdout, flag
    claude = subprocess.run([str(tool_path("claude")), "--help"], capture_output=True, text=True, timeout=60)
    for flag in (
        "--output-format",
        "--verbose",
        "--no-session-persistence",
        "--strict-mcp-config",
        "--mcp-config",
        "--tools",
        "--disallowedTools",
        "--permission-mode",
        "--model",
        "--effort",
        "--allowedTools",
        "--add-dir",
        "--settings",
    ):
        assert flag in claude.stdout, flag
    assert "dontAsk" in claude.stdout
