"""The orchestrator session in process: limits acted on, dependencies, and governance of results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ivoai.client.governance import CompactionPolicy, ContextGuard
from ivoai.client.orchestration._errors import OrchestrationUsageError
from ivoai.client.orchestration._fuse import LaunchFuse
from ivoai.client.orchestration._session import OrchestratorSession, SessionConfig
from ivoai.client.orchestration._settings import AutoSettings
from ivoai.client.orchestration._state import read_state
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.plans import plan, task
from tests.client.orchestration.support import codex_standin, fixture
from tests.client.orchestration.workers import git_tree

SESSION = "ses_" + "d" * 32
HOT = {
    "complexity": 70,
    "risk": 60,
    "verification_need": 70,
    "context_breadth": 60,
    "parallel_value": 90,
    "latency_sensitivity": 20,
}
OK_EVENTS = [
    {"type": "thread.started", "thread_id": "t"},
    {"type": "turn.started"},
    {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 5}},
]


def _answer(summary: str, next_step: str) -> str:
    return json.dumps(
        {
            "summary": summary,
            "findings": ["x" * 900] * 20,
            "state_delta": {"next_steps": [next_step], "changed_files": ["src/a.py"]},
        }
    )


def _session(xdg: XdgPaths, tmp_path: Path, exec_spec: dict[str, Any], **config: Any) -> OrchestratorSession:
    codex_standin(
        xdg,
        {
            "account": fixture("codex_account_chatgpt.json"),
            "rate_limits": fixture("codex_rate_limits_legacy.json"),
            "model_list": fixture("codex_model_list.json"),
            "exec": exec_spec,
        },
    )
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    cfg = SessionConfig(
        SESSION,
        "codex",
        str(git_tree(tmp_path / "repo")),
        approve=True,
        env=dict(__import__("os").environ),
        **config,
    )
    return OrchestratorSession(cfg, AutoSettings(), paths=xdg, spool_root=spool)


def _finish(session: OrchestratorSession, task_ids: list[str]) -> None:
    for _ in range(60):
        states = session.pool.wait(None, mode="all", timeout=5)
        with session._lock:  # a finished worker's follow-up (retry, dependents) happens under this lock
            finished = all(
                session.tasks[t].state not in ("queued", "running", "waiting_dependencies", "pending")
                for t in task_ids
            )
        if finished:
            return
    raise AssertionError(f"tasks did not finish: {states}")


def test_a_model_scoped_limit_is_recorded_and_the_task_reruns_once_on_a_cheaper_model(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    limited = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {
            "type": "turn.failed",
            "error": {
                "message": "You've hit your usage limit for this model. Switch to another model to continue."
            },
        },
    ]
    exec_spec = {
        "events": OK_EVENTS,
        "last_message": _answer("ok", "n"),
        "by_model": {"gpt-6.2-sol": {"events": limited, "last_message": None, "exit": 1}},
    }
    session = _session(xdg, tmp_path, exec_spec)
    try:
        session.submit_plan(plan(task("scan", role="review", sig=HOT)), "yes_flag")
        assert session.tasks["scan"].decision.profile.model == "gpt-6.2-sol"  # type: ignore[union-attr]
        session.spawn("scan")
        _finish(session, ["scan"])
        run = session.tasks["scan"]
        first = session.pool.get(run.worker_ids[0]).report
        assert first is not None and first.limit is not None, first
        assert first.limit.kind.value == "model_scoped" and first.limit.model == "gpt-6.2-sol"
        assert run.state == "succeeded" and len(run.worker_ids) == 2
        assert run.decision.profile is not None and run.decision.profile.model == "gpt-6.1-terra"
        assert run.decision.profile.downgraded
        assert "gpt-6.2-sol" in session.ledger.view().get("codex").blocked_models()
    finally:
        session.close()


def test_a_confirmed_hard_limit_trips_the_vendors_launch_breaker(xdg: XdgPaths, tmp_path: Path) -> None:
    failed = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "turn.failed", "error": {"message": "You've hit your usage limit. Try again at 6:33 PM."}},
    ]
    session = _session(xdg, tmp_path, {"events": failed, "exit": 1})
    try:
        session.submit_plan(plan(task("scan", sig=HOT)), "yes_flag")
        # The account reaches its limit now: the fresh read taken after the worker's message confirms it.
        codex_standin(
            xdg,
            {
                "account": fixture("codex_account_chatgpt.json"),
                "rate_limits": fixture("codex_rate_limits_exhausted.json"),
                "model_list": fixture("codex_model_list.json"),
                "exec": {"events": failed, "exit": 1},
            },
        )
        session.spawn("scan")
        _finish(session, ["scan"])
        report = session.pool.get(session.tasks["scan"].worker_ids[-1]).report
        assert report is not None and report.limit is not None and report.limit.confirmed
        breaker = LaunchFuse(xdg).status()["breakers"]
        assert "codex" in breaker and "confirmed" in report.limit.reason
        assert session.ledger.view().get("codex").hard_limit is not None
    finally:
        session.close()


def test_a_failed_dependency_blocks_its_dependents(xdg: XdgPaths, tmp_path: Path) -> None:
    session = _session(xdg, tmp_path, {"events": OK_EVENTS[:2], "exit": 3})
    try:
        session.submit_plan(plan(task("a", sig=HOT), task("b", deps=["a"], sig=HOT)), "yes_flag")
        results = session.spawn_batch(None)
        assert [r["state"] for r in results] == ["queued", "waiting_dependencies"]
        _finish(session, ["a", "b"])
        assert session.tasks["a"].state == "failed" and session.tasks["b"].state == "blocked"
        with pytest.raises(OrchestrationUsageError, match="dependency a did not succeed"):
            session.spawn("b")
    finally:
        session.close()


def test_results_past_the_context_threshold_come_back_compact_with_the_summary(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    session = _session(
        xdg, tmp_path, {"events": OK_EVENTS, "last_message": _answer("done", "write tests")}, workers=3
    )
    session.guard = ContextGuard(
        CompactionPolicy(
            name="small", window_tokens=12_000, threshold_ratio=0.8, recent_ratio=0.2, min_recent_turns=1
        ),
        session.metrics.context,
    )
    try:
        session.submit_plan(plan(*[task(f"t{i}", sig=HOT) for i in range(3)]), "yes_flag")
        session.spawn_batch(None)
        _finish(session, ["t0", "t1", "t2"])
        docs = [session.result(None, f"t{i}") for i in range(3)]
        assert not docs[0].get("compact") and len(docs[0]["result"]["findings"]) == 20
        compacted = [d for d in docs if d.get("compact")]
        assert compacted, "a later result should have been compacted"
        summary = compacted[0]["compaction"]["summary"]
        assert "write tests" in summary and "src/a.py" in summary  # next steps and changed files survive
        assert compacted[0]["result"]["refs"]  # the exact evidence stays reachable
        assert session.metrics.context.compactions >= 1
    finally:
        session.close()
    meta = read_state(SESSION, xdg)
    assert meta is not None and meta["metrics"]["context"]["compactions"] >= 1
    assert meta["metrics"]["usage"]["input_tokens"] == 15 and meta["metrics"]["workers"]["succeeded"] == 3
