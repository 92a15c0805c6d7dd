"""`ivoai auto` supervision: a confirmed hard limit fails over once; transient and model-scoped ones never.

The primaries are the logged-in stand-ins (codex_standin.py, claude_standin.py), replaying what the
real interactive clients write when a turn ends on a usage limit (the Codex rollout events and the
Claude hook payloads were captured from the real binaries against a scripted model service). The
supervisor, the classifier, the quota re-read, the reaping, the work-tree summary, the checkpoint
and the brief are ivoai's real code in a real `ivoai auto` process; the Claude -> Codex transcript
import is served by the real `codex app-server`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ivoai.client.orchestration._checkpoint import read_checkpoint
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.support import codex_standin, fixture, install
from tests.client.orchestration.test_checkpoint import _tree_fingerprint
from tests.client.orchestration.workers import git_tree
from tests.conftest import tool_path

LOGGED_IN = {"account": fixture("codex_account_chatgpt.json"), "model_list": fixture("codex_model_list.json")}
USAGE_LIMIT = "You’ve hit your usage limit. Upgrade to Pro or try again at Jan 1st, 2100 12:00 AM."
CHECKPOINT = {
    "objective": "Port the tokenizer to the new grammar",
    "completed": ["the lexer"],
    "next_step": "run the parser tests",
}
REJECTED = {
    "type": "rate_limit_event",
    "rate_limit_info": {"status": "rejected", "rateLimitType": "five_hour", "resetsAt": 4102444800},
}
ALLOWED = {
    "type": "rate_limit_event",
    "rate_limit_info": {"status": "allowed", "rateLimitType": "five_hour", "utilization": 0.4},
}


def _repo(tmp_path: Path) -> Path:
    repo = git_tree(tmp_path / "repo")
    (repo / "parser.py").write_text("def parse(x):\n    return x + 1\n")  # an uncommitted change
    return repo


def _auto(cwd: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ivoai", "auto", "--yes", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ), check=False,
    )  # fmt: skip


def _records(xdg: XdgPaths) -> list[dict[str, Any]]:
    docs = [json.loads(p.read_text()) for p in xdg.sessions_dir.glob("ses_*.json")]
    return sorted(docs, key=lambda d: d["started_at"])


def _claude(xdg: XdgPaths, **script: Any) -> Path:
    install(xdg, "claude", "claude_standin.py")
    home = Path(os.environ["HOME"]) / ".claude"
    home.mkdir(exist_ok=True)
    doc = {"logged_in": True, "initialize": fixture("claude_initialize_models.json"), **script}
    (home / "ivoai-standin.json").write_text(json.dumps(doc))
    xdg.data.chmod(0o700)
    return home


def _claude_primaries(home: Path) -> list[dict[str, Any]]:
    path = home / "ivoai-standin-runs.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(x) for x in lines if "primary_argv" in x]


def _codex(xdg: XdgPaths, rollout: dict[str, Any], **script: Any) -> Path:
    return codex_standin(
        xdg,
        {
            **LOGGED_IN,
            "rate_limits": fixture("codex_rate_limits_legacy.json"),
            "rate_limits_limited": fixture("codex_rate_limits_exhausted.json"),
            "primary": {"calls": [["orchestration_checkpoint", CHECKPOINT]], "rollout": rollout},
            **script,
        },
    )


def test_a_confirmed_codex_limit_fails_over_once_to_claude_with_the_brief(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    repo = _repo(tmp_path)
    codex_home = _codex(
        xdg, {"message": USAGE_LIMIT, "codex_error_info": "usage_limit_exceeded", "limited": True}
    )
    claude_home = _claude(xdg)
    before = _tree_fingerprint(repo)
    result = _auto(repo)
    assert result.returncode == 0, result.stderr
    assert _tree_fingerprint(repo) == before  # failover changed no file, not even git's index
    assert "codex reached a confirmed hard limit (confirmed by a fresh quota read" in result.stderr
    assert "handing over to claude with a" in result.stderr
    [alternate] = _claude_primaries(claude_home)  # exactly one failover
    brief = alternate["primary_argv"][-1]
    assert brief.startswith("ivoai AUTO handoff to claude (chain ses_")
    assert (
        "Objective: Port the tokenizer to the new grammar" in brief
        and "Next step: run the parser tests" in brief
    )
    assert "- M parser.py" in brief and len(brief.encode()) <= 8 * 1024
    assert "--session-id" in alternate["primary_argv"]  # the alternate's conversation is known too
    first, second = _records(xdg)
    confirmed = first["auto"]["supervisor"]["confirmed"]
    assert confirmed["verdict"]["kind"] == "hard_limit" and confirmed["verdict"]["confirmed"] is True
    assert (
        first["auto"]["conversation"]["vendor"] == "codex"
        and first["auto"]["conversation"]["source"] == "rollout_fd"
    )
    incoming = second["auto"]["incoming"]
    assert (
        incoming["kind"] == "failover"
        and incoming["from_session"] == first["id"]
        and incoming["consecutive"] == 1
    )
    assert 0 < incoming["failover_seconds"] < 60 and incoming["brief_bytes"] == len(brief.encode())
    assert second["auto"]["chain"]["root"] == first["id"] and second["executor"] == "claude"
    checkpoint = read_checkpoint(first["id"], xdg)
    assert checkpoint is not None and checkpoint.source == "supervisor" and checkpoint.seq == 2
    assert checkpoint.failover is not None and checkpoint.failover["to"] == "claude"
    lines = (codex_home / "ivoai-standin-requests.jsonl").read_text().splitlines()
    reads = [r for r in (json.loads(x) for x in lines)
             if r.get("method") == "account/rateLimits/read"]  # fmt: skip
    assert len(reads) == 2  # the gate, then the supervisor's re-read after the limit message


def test_a_transient_limit_never_fails_over(xdg: XdgPaths, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _codex(xdg, {"message": "stream error: 503 Service Unavailable: the server is overloaded",
                 "codex_error_info": "server_overloaded", "exit_after_verdict": True})  # fmt: skip
    claude_home = _claude(xdg)
    result = _auto(repo)
    assert result.returncode == 0, result.stderr
    assert _claude_primaries(claude_home) == [] and "handing over" not in result.stderr
    [record] = _records(xdg)
    [verdict] = record["auto"]["supervisor"]["verdicts"]
    assert verdict["kind"] == "transient" and record["auto"]["supervisor"]["confirmed"] is None


def test_a_limit_message_the_fresh_quota_read_does_not_confirm_never_fails_over(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    repo = _repo(tmp_path)
    _codex(
        xdg, {"message": USAGE_LIMIT, "codex_error_info": "usage_limit_exceeded", "exit_after_verdict": True}
    )
    claude_home = _claude(xdg)
    result = _auto(repo)
    assert result.returncode == 0, result.stderr
    assert _claude_primaries(claude_home) == []
    [record] = _records(xdg)
    [verdict] = record["auto"]["supervisor"]["verdicts"]
    assert verdict["kind"] == "transient" and "not confirmed by a fresh quota read" in verdict["reason"]


def test_a_model_scoped_limit_never_fails_over(xdg: XdgPaths, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _codex(xdg, {"message": USAGE_LIMIT, "codex_error_info": "usage_limit_exceeded",
                 "limit_id": "gpt-6.2-sol",
                 "limited": True, "exit_after_verdict": True})  # fmt: skip
    claude_home = _claude(xdg)
    result = _auto(repo)
    assert result.returncode == 0, result.stderr
    assert _claude_primaries(claude_home) == []
    [record] = _records(xdg)
    assert record["auto"]["supervisor"]["verdicts"][0]["kind"] == "model_scoped"


def test_a_claude_limit_fails_over_to_codex_with_the_imported_conversation(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    """Claude -> Codex: the transcript is imported by the real `codex app-server`; the alternate
    opens that conversation (`codex resume THREAD BRIEF`)."""
    repo = _repo(tmp_path)
    codex_home = codex_standin(
        xdg,
        {**LOGGED_IN, "rate_limits": fixture("codex_rate_limits_legacy.json"),
         "real_codex": str(tool_path("codex"))},
    )  # fmt: skip
    failure = {"error": "rate_limit", "message": "API Error: You've hit your usage limit", "limited": True,
               "user_text": "Port the tokenizer to the new grammar"}  # fmt: skip
    claude_home = _claude(xdg, primary={"stop_failure": failure}, events=[ALLOWED], events_limited=[REJECTED])
    result = _auto(repo, "--planner", "claude")
    assert result.returncode == 0, result.stderr
    assert (
        "claude reached a confirmed hard limit (confirmed by a fresh quota read (rate_limit_event"
        in result.stderr
    )
    assert "the Claude conversation was imported into Codex" in result.stderr
    requests = [json.loads(x) for x in (codex_home / "ivoai-standin-requests.jsonl").read_text().splitlines()]
    [alternate] = [r for r in requests if "primary_argv" in r]
    *_, resume, thread, brief = alternate["primary_argv"]
    assert resume == "resume" and brief.startswith("ivoai AUTO handoff to codex")
    assert f"imported into this one ({thread})" in brief
    [imported] = list(
        (codex_home / "sessions").rglob(f"rollout-*-{thread}.jsonl")
    )  # written by the real codex
    assert "Port the tokenizer to the new grammar" in imported.read_text()
    [claude_primary] = _claude_primaries(claude_home)
    assert claude_primary["primary_argv"][claude_primary["primary_argv"].index("--session-id") + 1]
    settings = claude_primary["settings"][0]
    assert {"SessionStart", "StopFailure"} <= set(settings["hooks"]) and "statusLine" in settings
    first, second = _records(xdg)
    assert first["auto"]["conversation"]["source"] in ("assigned", "hook")
    assert second["auto"]["incoming"]["imported"]["thread"] == thread


def test_the_third_consecutive_failover_is_refused_with_the_reset_times(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three confirmed limits in a row with no new checkpoint: two failovers, then a clear stop."""
    from ivoai.client.orchestration._auto import AutoArgs, AutoExtension, GateReport, _fail_over
    from ivoai.client.orchestration._classify import LimitKind, LimitVerdict
    from ivoai.client.orchestration._failover import FailoverRefusedError
    from ivoai.client.orchestration._settings import AutoSettings
    from ivoai.client.orchestration._supervisor import Confirmed

    repo = _repo(tmp_path)
    codex_standin(xdg, {**LOGGED_IN, "rate_limits": fixture("codex_rate_limits_legacy.json")})
    _claude(xdg)
    monkeypatch.chdir(repo)
    env = dict(os.environ)
    ext = AutoExtension(AutoArgs("codex", yes=True), GateReport("codex", "claude"), AutoSettings(), env)
    ext.chain.sessions.append("ses_" + "1" * 32)
    ext.session_id = ext.chain.sessions[-1]
    for n in range(2):
        verdict = LimitVerdict(
            LimitKind.HARD_LIMIT, "stop_vendor", "five_hour rejected", True, resets_at=4102444800.0
        )
        ext = _fail_over(ext, Confirmed(verdict, 1.0, 1.0, "primary"), AutoSettings(), env)
        assert ext.chain.consecutive == n + 1 and ext.incoming is not None
        ext.session_id = f"ses_{str(n + 2) * 32}"
        ext.chain.sessions.append(ext.session_id)
    assert ext.args.planner == "codex" and [h["to"] for h in ext.chain.history] == ["claude", "codex"]
    verdict = LimitVerdict(LimitKind.HARD_LIMIT, "stop_vendor", "usage limit", True, resets_at=4102444800.0)
    try:
        _fail_over(ext, Confirmed(verdict, 1.0, 1.0, "primary"), AutoSettings(), env)
    except FailoverRefusedError as exc:
        message = exc.message
    else:
        raise AssertionError("the third failover was not refused")
    assert "a failover number 3 in a row without a new checkpoint is refused (at most 2)" in message
    assert "codex resets at 2100-01-01" in message and "Nothing was started" in message


def test_a_new_checkpoint_by_the_primary_resets_the_failover_count(xdg: XdgPaths) -> None:
    from ivoai.client.orchestration._checkpoint import parse_body, write_checkpoint
    from ivoai.client.orchestration._failover import Chain, FailoverRefusedError

    root = "ses_" + "9" * 32
    chain = Chain(sessions=[root])
    body = parse_body({"objective": "x"})
    for _ in range(2):
        chain.admit(read_checkpoint(root, xdg), {})
        chain.seen_seq = write_checkpoint(
            root, body, source="supervisor", session_id=root, vendor="codex", paths=xdg
        ).seq
    write_checkpoint(root, body, source="primary", session_id=root, vendor="claude", paths=xdg)
    chain.admit(read_checkpoint(root, xdg), {})  # progress was recorded: allowed again
    assert chain.consecutive == 1
    chain.seen_seq = write_checkpoint(
        root, body, source="supervisor", session_id=root, vendor="codex", paths=xdg
    ).seq
    chain.admit(read_checkpoint(root, xdg), {})
    try:
        chain.admit(read_checkpoint(root, xdg), {"claude": None})
    except FailoverRefusedError as exc:
        assert "claude resets at an unknown time" in exc.message
    else:
        raise AssertionError("the third failover without a checkpoint was not refused")


def test_an_alternate_at_its_own_limit_stops_the_chain_with_both_reset_times(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    repo = _repo(tmp_path)
    _codex(xdg, {"message": USAGE_LIMIT, "codex_error_info": "usage_limit_exceeded", "limited": True})
    claude_home = _claude(xdg)
    from ivoai.client.orchestration._ledger import QuotaLedger
    from ivoai.client.orchestration._quota import HardLimit

    QuotaLedger(xdg).record_hard_limit(
        HardLimit("claude", True, "claude_rate_limit_event", 1.0, 4102444800.0, "seven_day")
    )
    result = _auto(repo)
    assert result.returncode == 1
    assert "stopped: the alternate claude cannot take over (claude reached its limit" in result.stderr
    assert "codex resets at" in result.stderr and "claude resets at 2100-01-01" in result.stderr
    assert _claude_primaries(claude_home) == []


def test_on_a_real_terminal_the_alternate_gets_it_back_cooked(xdg: XdgPaths, tmp_path: Path) -> None:
    """A TUI killed at failover leaves raw mode and the alternate screen: ivoai restores both."""
    import pty
    import select
    import time

    repo = _repo(tmp_path)
    codex_standin(
        xdg,
        {**LOGGED_IN, "rate_limits": fixture("codex_rate_limits_legacy.json"),
         "rate_limits_limited": fixture("codex_rate_limits_exhausted.json"),
         "primary": {"raw_tty": True,
                     "rollout": {"message": USAGE_LIMIT, "codex_error_info": "usage_limit_exceeded",
                                 "limited": True}}},
    )  # fmt: skip
    claude_home = _claude(xdg)
    master, slave = pty.openpty()
    slave_name = os.ttyname(slave)
    os.close(slave)
    boot = (
        "import os, sys; os.setsid(); fd = os.open(sys.argv[1], os.O_RDWR); "
        "[os.dup2(fd, i) for i in (0, 1, 2)]; "
        "os.execv(sys.executable, [sys.executable, '-m', 'ivoai', 'auto', '--yes'])"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", boot, slave_name], cwd=repo, env=dict(os.environ),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    seen = b""
    deadline = time.monotonic() + 180
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([master], [], [], 0.05)[0]:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
        code = proc.wait(timeout=60)
        while select.select([master], [], [], 0.2)[0]:  # what is still buffered in the pty
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert code == 0, seen.decode("utf-8", "replace")[-2000:]
    [alternate] = _claude_primaries(claude_home)
    assert alternate["tty"] == {"icanon": True, "echo": True}  # cooked again when the alternate started
    assert b"\x1b[?1049h" in seen and b"\x1b[?1049l\x1b[?25h" in seen  # left the alternate screen
