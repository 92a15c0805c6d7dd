"""Auto-resume after a reset: each stalled worker is continued exactly once, even with two racers.

The workers are the logged-in codex stand-in (codex_standin.py): a `codex exec` that ends on a
usage limit while the account is limited (its app-server then answers the exhausted rate limits),
and a `codex exec resume THREAD` that completes. The flags ivoai passes for a continuation are
checked against the real binaries' `--help`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from ivoai.client.config.store import set_key
from ivoai.client.orchestration._autoresume import claim
from ivoai.client.orchestration._monitor import session_auto
from ivoai.client.orchestration._scoring import Tier
from ivoai.client.orchestration._session import OrchestratorSession, SessionConfig
from ivoai.client.orchestration._settings import AutoSettings
from ivoai.client.orchestration._state import read_state, write_state
from ivoai.client.orchestration._worker_spec import WorkerSpec, claude_argv, codex_argv
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.plans import plan, task
from tests.client.orchestration.support import codex_standin, fixture
from tests.client.orchestration.workers import git_tree, wait_for
from tests.conftest import tool_path

SESSION = "ses_" + "3" * 32
LIMIT = "You’ve hit your usage limit. Upgrade to Pro or try again later."
ANSWER = json.dumps({"summary": "continued fine", "findings": [], "state_delta": {}})
HOT = {"complexity": 70, "risk": 60, "verification_need": 70, "context_breadth": 60, "parallel_value": 90,
       "latency_sensitivity": 20}  # fmt: skip


def _script(thread: str = "th-1") -> dict[str, Any]:
    stopped = [{"type": "thread.started", "thread_id": thread}, {"type": "turn.started"},
               {"type": "turn.failed", "error": {"message": LIMIT}}]  # fmt: skip
    done = [{"type": "thread.started", "thread_id": thread}, {"type": "turn.started"},
            {"type": "turn.completed", "usage": {"input_tokens": 3, "output_tokens": 2}}]  # fmt: skip
    return {
        "account": fixture("codex_account_chatgpt.json"),
        "rate_limits": fixture("codex_rate_limits_legacy.json"),
        "rate_limits_limited": fixture("codex_rate_limits_exhausted.json"),
        "model_list": fixture("codex_model_list.json"),
        "exec": {"events": stopped, "exit": 1, "limited": True,
                 "resume": {"events": done, "last_message": ANSWER, "exit": 0, "limited": False}},
    }  # fmt: skip


def _runs(home: Path) -> list[list[str]]:
    path = home / "ivoai-standin-requests.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(x)["exec_argv"] for x in lines if "exec_argv" in x]


def test_the_continuation_flags_exist_in_the_installed_clients(tmp_path: Path) -> None:
    spec = WorkerSpec(SESSION, "t", "wrk_1", "codex", "gpt-6.2-sol", "high", Tier.STRONG, "p", str(tmp_path),
                      persist=True, resume_conversation="th-1")  # fmt: skip
    argv = codex_argv(spec, "codex", "last.txt", "schema.json")
    assert argv[1:4] == ["exec", "resume", "th-1"] and 'sandbox_mode="read-only"' in argv
    help_text = subprocess.run(
        [str(tool_path("codex")), "exec", "resume", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    for flag in (a for a in argv[4:] if a.startswith("-") and a != "-"):
        assert flag in help_text, flag
    claude = WorkerSpec(SESSION, "t", "wrk_2", "claude", "sonnet", None, Tier.STRONG, "p", str(tmp_path),
                        persist=True, conversation_id="7d1c5d3e-1111-4222-8333-944444444444")  # fmt: skip
    fresh = claude_argv(claude, "claude", "mcp.json")
    assert "--session-id" in fresh and "--no-session-persistence" not in fresh
    resumed = claude_argv(
        WorkerSpec(**{**claude.__dict__, "resume_conversation": "7d1c"}), "claude", "mcp.json"
    )
    assert resumed[resumed.index("--resume") + 1] == "7d1c"
    claude_help = subprocess.run(
        [str(tool_path("claude")), "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    for flag in ("--resume", "--session-id"):
        assert flag in claude_help


def test_a_stalled_worker_is_continued_once_after_the_reset(xdg: XdgPaths, tmp_path: Path) -> None:
    home = codex_standin(xdg, _script())
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    config = SessionConfig(
        SESSION, "codex", str(git_tree(tmp_path / "repo")), approve=True, env=dict(os.environ)
    )
    session = OrchestratorSession(config, AutoSettings(resume_after_reset=True), paths=xdg, spool_root=spool)
    try:
        report, _ = session.submit_plan(plan(task("scan", sig=HOT)), "yes_flag")
        assert report.valid
        session.spawn("scan")
        wait_for(lambda: session.tasks["scan"].state == "failed")
        [stalled] = (read_state(SESSION, xdg) or {})["resume"]["workers"]
        assert stalled["state"] == "waiting_for_reset" and stalled["conversation"] == "th-1"
        shown = session_auto(SESSION, {"planner": "codex"}, live=True, paths=xdg)  # what `monitor` shows
        assert shown is not None and shown["resume"][0]["state"] == "waiting_for_reset"
        assert stalled["resets_at"] > time.time()  # the fixture's reset, still ahead
        assert session.resumer is not None and session.resumer.tick() == []  # not due yet
        (home / "ivoai-standin-limited").unlink()  # the window reset
        [continuation] = session.resumer.tick(now=stalled["resets_at"] + 1)
        wait_for(lambda: session.tasks["scan"].state == "succeeded")
        assert session.resumer.tick(now=stalled["resets_at"] + 2) == []  # never twice
        assert session.result(continuation, None)["result"]["summary"] == "continued fine"
    finally:
        session.close()
    resumed = [argv for argv in _runs(home) if argv[:2] == ["exec", "resume"]]
    assert len(resumed) == 1 and resumed[0][2] == "th-1" and "--ephemeral" not in resumed[0]
    [first] = [argv for argv in _runs(home) if argv[:2] != ["exec", "resume"]]
    assert "--ephemeral" not in first  # the conversation was kept so that it could be continued
    meta = read_state(SESSION, xdg) or {}
    [entry] = meta["resume"]["workers"]
    assert entry["state"] == "continued" and entry["continued_by"] == continuation


def test_a_limit_still_there_at_the_reset_waits_again_then_gives_up(xdg: XdgPaths, tmp_path: Path) -> None:
    home = codex_standin(xdg, _script())
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    config = SessionConfig(
        SESSION, "codex", str(git_tree(tmp_path / "repo")), approve=True, env=dict(os.environ)
    )
    settings = AutoSettings(resume_after_reset=True, resume_windows=2)
    session = OrchestratorSession(config, settings, paths=xdg, spool_root=spool)
    try:
        session.submit_plan(plan(task("scan", sig=HOT)), "yes_flag")
        session.spawn("scan")
        wait_for(lambda: session.tasks["scan"].state == "failed")
        assert session.resumer is not None
        far = time.time() + 10 * 365 * 86400
        assert session.resumer.tick(now=far) == []  # still limited: one window used, waits again
        [entry] = session.resumer.entries.values()
        assert entry.state == "waiting_for_reset" and session.resumer.windows_used == 1
        assert session.resumer.tick(now=far) == [] and entry.state == "gave_up"
    finally:
        session.close()
    assert not [argv for argv in _runs(home) if argv[:2] == ["exec", "resume"]]


def test_claims_are_exclusive_per_worker(xdg: XdgPaths) -> None:
    assert claim(xdg, SESSION, "wrk_aaaa") is True
    assert claim(xdg, SESSION, "wrk_aaaa") is False
    assert claim(xdg, SESSION, "wrk_bbbb") is True
    assert claim(xdg, SESSION, "../escape") is False


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_two_orchestrators_racing_continue_each_stalled_worker_exactly_once(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    """Two orchestrator processes of one session (a client that restarted its MCP server while the
    old one still ran) both find the same two stalled workers past their reset."""
    script = _script()
    script["exec"] = script["exec"]["resume"]  # the account is free again: continuations succeed
    home = codex_standin(xdg, script)
    set_key("auto.resume_after_reset", "true", xdg)
    repo = git_tree(tmp_path / "repo")
    past = time.time() - 60
    stalled = [
        {"worker_id": f"wrk_{n}", "task_id": "scan", "vendor": "codex", "model": "gpt-6.2-sol",
         "effort": "high", "tier": "strong", "conversation": f"th-{n}", "resets_at": past,
         "state": "waiting_for_reset"}
        for n in ("a1", "b2")
    ]  # fmt: skip
    write_state(SESSION, {"session_id": SESSION, "resume": {"workers": stalled}}, xdg)
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    runtime = run / "orchestrator.json"
    xdg_env = {
        v: os.environ[v] for v in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
    }
    doc = {"session_id": SESSION, "planner": "codex", "workdir": str(repo), "approve": True, "workers": 2,
           "env": {k: os.environ[k] for k in ("PATH", "HOME")}, "xdg": xdg_env}  # fmt: skip
    runtime.write_text(json.dumps(doc))
    runtime.chmod(0o600)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ivoai.client.orchestration.mcp_server", "--runtime", str(runtime)],
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )  # fmt: skip

    async def orchestrator(done: anyio.Event) -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()  # the takeover and its tick happen while it starts
            await s.call_tool("orchestration_wait", {"mode": "all", "timeout_seconds": 60})
            await done.wait()

    done = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(orchestrator, done)
        group.start_soon(orchestrator, done)
        with anyio.fail_after(120):
            while len([a for a in _runs(home) if a[:2] == ["exec", "resume"]]) < 2:
                await anyio.sleep(0.05)
        done.set()
    resumed = sorted(a[2] for a in _runs(home) if a[:2] == ["exec", "resume"])
    assert resumed == ["th-a1", "th-b2"]  # each stalled worker continued once, by one of the two
    markers = sorted(p.name for p in (xdg.state / "auto" / "resume" / SESSION).iterdir())
    assert markers == ["wrk_a1.claim", "wrk_b2.claim"]
