"""`ivoai session resume | handoff | recover`: what each reopens or starts, and every refusal.

Session records and plan metadata are written as ivoai writes them (SessionStore, write_state,
write_checkpoint); the clients are the logged-in stand-ins (codex_standin.py, claude_standin.py),
which record the argv they were started with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ivoai.client.orchestration._checkpoint import parse_body, write_checkpoint
from ivoai.client.orchestration._lease import acquire_lease
from ivoai.client.orchestration._state import write_state
from ivoai.client.sessions.procinfo import start_marker
from ivoai.client.sessions.records import SessionRecord, SessionStore
from ivoai.common.paths import XdgPaths
from tests.cli.test_auto_failover import LOGGED_IN, _claude, _claude_primaries
from tests.client.orchestration.support import codex_standin, fixture
from tests.client.orchestration.workers import git_tree

SID = "ses_" + "5" * 32
THREAD = "01a23299-0000-7000-8000-000000000001"
CLAUDE_SID = "7d1c5d3e-1111-4222-8333-944444444444"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}  # fmt: skip
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def _session(
    xdg: XdgPaths,
    repo: Path,
    *,
    executor: str = "codex",
    conversation: dict[str, Any] | None = None,
    live: bool = False,
    plan: dict[str, Any] | None = None,
) -> None:
    me = os.getpid()
    record = SessionRecord(
        id=SID, executor=executor, pid=me if live else 2**22 + 7,
        pid_start=start_marker(me) if live else None,
        started_at=time.time() - 60, requested_provider="direct", effective_provider="direct",
        provider_source="flag", state="running" if live else "ended",
        auto={"planner": executor, "chain": {"root": SID, "sessions": [SID]}, "workdir": str(repo),
              "conversation": conversation, "plan": None, "approve": True},
    )  # fmt: skip
    SessionStore(xdg).write(record)
    if plan is not None:
        write_state(SID, plan, xdg)


def _ivoai(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ivoai", "session", *args], cwd=repo, capture_output=True, text=True,
        timeout=240, env=dict(os.environ), check=False,
    )  # fmt: skip


def _codex_primaries(home: Path) -> list[list[str]]:
    path = home / "ivoai-standin-requests.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(x)["primary_argv"] for x in lines if "primary_argv" in x]


def _codex(xdg: XdgPaths) -> Path:
    return codex_standin(xdg, {**LOGGED_IN, "rate_limits": fixture("codex_rate_limits_legacy.json")})


def _new_records(xdg: XdgPaths) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in xdg.sessions_dir.glob("ses_*.json") if p.stem != SID]


def test_resume_reopens_the_codex_conversation_without_replaying_anything(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    repo = git_tree(tmp_path / "repo")
    home = _codex(xdg)
    _claude(xdg)
    _session(xdg, repo, conversation={"vendor": "codex", "id": THREAD, "source": "rollout_fd"})
    result = _ivoai(repo, "resume", SID)
    assert result.returncode == 0, result.stderr
    [argv] = _codex_primaries(home)
    assert argv[-2:] == ["resume", THREAD]  # the thread, and no prompt after it
    [record] = _new_records(xdg)
    assert (
        record["auto"]["incoming"]["kind"] == "resume" and record["auto"]["incoming"]["from_session"] == SID
    )
    assert record["auto"]["chain"]["root"] == SID and record["auto"]["conversation"]["id"] == THREAD


def test_resume_reopens_the_claude_session_by_its_id(xdg: XdgPaths, tmp_path: Path) -> None:
    repo = git_tree(tmp_path / "repo")
    _codex(xdg)
    home = _claude(xdg)
    _session(
        xdg,
        repo,
        executor="claude",
        conversation={"vendor": "claude", "id": CLAUDE_SID, "source": "assigned"},
    )
    result = _ivoai(repo, "resume", SID)
    assert result.returncode == 0, result.stderr
    [run] = _claude_primaries(home)
    argv = run["primary_argv"]
    assert argv[-2:] == ["--resume", CLAUDE_SID] and "--session-id" not in argv


def test_resume_refusals_name_the_reason_and_what_to_do(xdg: XdgPaths, tmp_path: Path) -> None:
    repo = git_tree(tmp_path / "repo")
    home = _codex(xdg)
    _claude(xdg)
    _session(xdg, repo, live=True, conversation={"vendor": "codex", "id": THREAD})
    running = _ivoai(repo, "resume", SID)
    assert running.returncode == 1 and f"session {SID} is still running" in running.stderr
    _session(xdg, repo, conversation=None)
    unknown = _ivoai(repo, "resume", SID)
    assert unknown.returncode == 1 and "native conversation" in unknown.stderr
    assert f"ivoai session handoff {SID} --to codex --confirm" in unknown.stderr
    _session(xdg, repo, conversation={"vendor": "codex", "id": THREAD})
    elsewhere = _ivoai(tmp_path, "resume", SID)
    assert elsewhere.returncode == 1 and f"worked in {repo}; run this command from there" in elsewhere.stderr
    codex_standin(xdg, {**LOGGED_IN, "rate_limits": fixture("codex_rate_limits_exhausted.json")})
    limited = _ivoai(repo, "resume", SID)
    assert limited.returncode == 1 and "codex reached its limit (rate_limit_reached)" in limited.stderr
    assert f"ivoai session handoff {SID} --to claude --confirm" in limited.stderr
    assert _codex_primaries(home) == []


def test_a_second_resume_of_one_session_is_refused_while_the_lease_is_held(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    """The lease is a kernel flock: held here by this process, refused to the `ivoai` process."""
    repo = git_tree(tmp_path / "repo")
    home = _codex(xdg)
    _session(xdg, repo, conversation={"vendor": "codex", "id": THREAD})
    lease = acquire_lease(SID, xdg)
    try:
        busy = _ivoai(repo, "resume", SID)
        assert busy.returncode == 1
        assert f"already being driven by another ivoai process (pid {os.getpid()})" in busy.stderr
        assert _codex_primaries(home) == []
    finally:
        lease.release()
    assert _ivoai(repo, "resume", SID).returncode == 0  # free again once its holder let go
    assert len(_codex_primaries(home)) == 1


def test_handoff_shows_the_brief_and_starts_only_with_confirm(xdg: XdgPaths, tmp_path: Path) -> None:
    repo = git_tree(tmp_path / "repo")
    _codex(xdg)
    home = _claude(xdg)
    _session(xdg, repo, conversation={"vendor": "codex", "id": THREAD})
    write_checkpoint(SID, parse_body({"objective": "Port the tokenizer", "next_step": "run the tests"}),
                     source="primary", session_id=SID, vendor="codex", paths=xdg)  # fmt: skip
    shown = _ivoai(repo, "handoff", SID, "--to", "claude")
    assert shown.returncode == 2 and "add --confirm to start it" in shown.stderr
    assert "Objective: Port the tokenizer" in shown.stdout and _claude_primaries(home) == []
    started = _ivoai(repo, "handoff", SID, "--to", "claude", "--confirm")
    assert started.returncode == 0, started.stderr
    [run] = _claude_primaries(home)
    brief = run["primary_argv"][-1]
    assert brief.startswith("ivoai AUTO handoff to claude") and "Next step: run the tests" in brief
    bad = _ivoai(repo, "handoff", SID, "--to", "gemini", "--confirm")
    assert bad.returncode == 2 and "--to must be codex or claude" in bad.stderr


def _plan(head: str, *, workers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    tasks = [
        {"id": "scan", "state": "succeeded", "tier": "strong"},
        {"id": "review", "state": "running", "tier": "strong"},
    ]
    return {"plan": {"state": "approved", "head": head, "tasks": tasks}, "workers": workers or []}


def test_recover_refuses_when_head_moved(xdg: XdgPaths, tmp_path: Path) -> None:
    repo = git_tree(tmp_path / "repo")
    _codex(xdg)
    old = _git(repo, "rev-parse", "HEAD")
    _git(repo, "commit", "--allow-empty", "-q", "-m", "moved on")
    _session(xdg, repo, plan=_plan(old))
    result = _ivoai(repo, "recover", SID, "--yes")
    assert (
        result.returncode == 1 and f"HEAD moved since the plan of session {SID} was approved" in result.stderr
    )


def test_recover_refuses_while_a_worker_it_owns_still_runs(xdg: XdgPaths, tmp_path: Path) -> None:
    repo = git_tree(tmp_path / "repo")
    home = _codex(xdg)
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        worker = {"worker_id": "wrk_orphan", "pid": orphan.pid, "pid_start": start_marker(orphan.pid)}
        _session(xdg, repo, plan=_plan(_git(repo, "rev-parse", "HEAD"), workers=[worker]))
        result = _ivoai(repo, "recover", SID, "--yes")
        assert (
            result.returncode == 1
            and f"worker wrk_orphan of session {SID} still runs (pid {orphan.pid})" in result.stderr
        )
    finally:
        orphan.kill()
        orphan.wait()
    assert _codex_primaries(home) == []


def test_recover_refuses_when_a_writes_outcome_is_uncertain(xdg: XdgPaths, tmp_path: Path) -> None:
    repo = git_tree(tmp_path / "repo")
    _codex(xdg)
    _session(xdg, repo, plan=_plan(_git(repo, "rev-parse", "HEAD")))
    write_checkpoint(SID, parse_body({"objective": "x", "uncertain_effects": ["migration 42 may have run"]}),
                     source="primary", session_id=SID, vendor="codex", paths=xdg)  # fmt: skip
    listed = _ivoai(repo, "recover", SID, "--yes")
    assert (
        listed.returncode == 1
        and "the outcome of a write is uncertain (migration 42 may have run)" in listed.stderr
    )
    write_checkpoint(SID, parse_body({"objective": "x", "changed_files": ["parser.py"]}),
                     source="primary", session_id=SID, vendor="codex", paths=xdg)  # fmt: skip
    (repo / "parser.py").write_text("changed\n")
    (repo / "half_written.py").write_text("partial\n")
    unlisted = _ivoai(repo, "recover", SID, "--yes")
    assert unlisted.returncode == 1
    assert "the work tree has changes the last checkpoint does not list (half_written.py)" in unlisted.stderr


def test_recover_needs_fresh_approval_then_reruns_the_open_tasks(xdg: XdgPaths, tmp_path: Path) -> None:
    repo = git_tree(tmp_path / "repo")
    home = _codex(xdg)
    _session(xdg, repo, plan=_plan(_git(repo, "rev-parse", "HEAD")))
    unapproved = _ivoai(repo, "recover", SID)  # not a terminal, no --yes: the safe default
    assert unapproved.returncode == 1 and "needs fresh approval" in unapproved.stderr
    assert _codex_primaries(home) == []
    approved = _ivoai(repo, "recover", SID, "--yes")
    assert approved.returncode == 0, approved.stderr
    [argv] = _codex_primaries(home)
    assert "tasks done scan; run again review" in argv[-1]
    [record] = _new_records(xdg)
    assert record["auto"]["incoming"]["rerun"] == ["review"] and record["auto"]["incoming"]["done"] == [
        "scan"
    ]
