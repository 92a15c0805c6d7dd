"""`ivoai auto`: the quota gate, the primary with the orchestrator, the record, and the real clients."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ivoai.client.agents.session_extras import merge_claude_settings
from ivoai.client.orchestration._auto import AutoArgs, AutoExtension, GateReport, parse_auto_args
from ivoai.client.orchestration._settings import AutoSettings
from ivoai.common.errors import UsageError
from ivoai.common.paths import XdgPaths
from tests.cli.test_launch_isolation import enroll_unreachable_source
from tests.client.orchestration.model_stub import Reply, model_stub
from tests.client.orchestration.plans import plan, task
from tests.client.orchestration.support import codex_standin, fixture, install, real_clients_on_path
from tests.conftest import run_ivoai, tool_path

LOGGED_IN = {"account": fixture("codex_account_chatgpt.json"), "model_list": fixture("codex_model_list.json")}
HOT = {
    "complexity": 70,
    "risk": 60,
    "verification_need": 70,
    "context_breadth": 60,
    "parallel_value": 90,
    "latency_sensitivity": 20,
}


def _records(xdg: XdgPaths) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(xdg.sessions_dir.glob("ses_*.json"))]


def _claude_standin(xdg: XdgPaths, logged_in: bool) -> None:
    install(xdg, "claude", "claude_standin.py")
    home = Path(os.environ["HOME"]) / ".claude"
    home.mkdir(exist_ok=True)
    script = {"logged_in": logged_in, "initialize": fixture("claude_initialize_models.json")}
    (home / "ivoai-standin.json").write_text(json.dumps(script))


def test_auto_args_are_parsed_and_bad_ones_named() -> None:
    parsed = parse_auto_args(
        ["--planner", "claude", "--yes", "--knowledge-source", "team", "--", "--model", "x"]
    )
    assert parsed == AutoArgs("claude", ("team",), yes=True, client_args=("--model", "x"))
    assert parse_auto_args(["fix", "it"]).client_args == ("fix", "it")
    with pytest.raises(UsageError, match="codex or claude"):
        parse_auto_args(["--planner", "gemini"])
    with pytest.raises(UsageError, match="unknown option '--fast'"):
        parse_auto_args(["--fast"])


def test_help_does_not_start_anything(xdg: XdgPaths) -> None:
    result = run_ivoai("auto", "--help")
    assert result.returncode == 0 and "ivoai auto plan --check" in result.stdout
    assert _records(xdg) == []


def test_a_logged_out_planner_is_refused_naming_the_alternate_and_nothing_starts(
    xdg: XdgPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_clients_on_path(monkeypatch)
    result = run_ivoai("auto", env=dict(os.environ))
    assert result.returncode == 1
    assert "codex is not logged in (run `ivoai connect chatgpt`); nothing was started" in result.stderr
    assert "the alternate claude is not available either (claude is not logged in" in result.stderr
    assert _records(xdg) == []


def test_a_confirmed_hard_limit_blocks_the_primary_with_the_reset_and_the_alternate(xdg: XdgPaths) -> None:
    home = codex_standin(xdg, {**LOGGED_IN, "rate_limits": fixture("codex_rate_limits_exhausted.json")})
    _claude_standin(xdg, logged_in=True)
    result = run_ivoai("auto", env=dict(os.environ))
    assert result.returncode == 1
    assert re.search(
        r"codex reached its limit \(rate_limit_reached\) until \d{4}-\d\d-\d\d \d\d:\d\d;", result.stderr
    )
    assert "the alternate claude is available: start it with `ivoai auto --planner claude`" in result.stderr
    assert not any(
        "primary_argv" in line for line in (home / "ivoai-standin-requests.jsonl").read_text().splitlines()
    )
    assert _records(xdg) == []


def test_unknown_quota_never_blocks_and_the_primary_gets_the_orchestrator(xdg: XdgPaths) -> None:
    overloaded = {"error": {"code": -32001, "message": "server overloaded"}}
    home = codex_standin(xdg, {**LOGGED_IN, "rate_limits": overloaded})
    _claude_standin(xdg, logged_in=False)
    result = run_ivoai("auto", "--", "--model", "gpt-6.2-sol", env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert "codex quota is unknown; it does not block the session" in result.stderr
    [run] = [
        json.loads(x)
        for x in (home / "ivoai-standin-requests.jsonl").read_text().splitlines()
        if "primary_argv" in x
    ]
    argv = run["primary_argv"]
    assert argv[-2:] == ["--model", "gpt-6.2-sol"]
    joined = " ".join(argv)
    assert "mcp_servers.ivoai-orchestrator.command=" in joined and "tool_timeout_sec=330" in joined
    assert "ivoai-orchestrator" in joined and "orchestration_bootstrap" in next(
        a for a in argv if a.startswith("developer_instructions")
    )
    assert 'mcp_servers.ivoai-orchestrator.tools.orchestration_wait.approval_mode="approve"' in argv
    assert not any("orchestration_plan.approval_mode" in a for a in argv)  # the user approves plans
    [record] = _records(xdg)
    assert record["auto"]["planner"] == "codex" and record["auto"]["gate"]["planner_state"] == "ok"
    assert record["auto"]["approve"] is False


def test_an_auto_session_runs_a_plan_and_the_record_keeps_its_metadata_only(xdg: XdgPaths) -> None:
    events = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "turn.completed", "usage": {"input_tokens": 3, "output_tokens": 2}},
    ]
    answer = json.dumps({"summary": "ok", "findings": ["f"], "state_delta": {}})
    doc = plan(
        task("scan", sig=HOT, text="Secret task text about the billing module"),
        task(
            "keep",
            complexity=5,
            risk=5,
            reasoning_depth=5,
            context_breadth=5,
            verification_need=5,
            parallel_value=5,
        ),
    )
    calls = [
        ["orchestration_plan", {"plan": doc}],
        ["orchestration_spawn_batch", {}],
        ["orchestration_wait", {"mode": "all", "timeout_seconds": 120}],
        ["orchestration_result", {"task_id": "scan"}],
    ]
    home = codex_standin(
        xdg,
        {
            **LOGGED_IN,
            "rate_limits": fixture("codex_rate_limits_legacy.json"),
            "exec": {"events": events, "last_message": answer},
            "primary": {"calls": calls},
        },
    )
    _claude_standin(xdg, logged_in=False)
    result = run_ivoai("auto", "--yes", env=dict(os.environ), timeout=180)
    assert result.returncode == 0, result.stderr
    answers = [json.loads(x) for x in (home / "ivoai-standin-primary.jsonl").read_text().splitlines()]
    assert [a["is_error"] for a in answers] == [False] * 4
    assert answers[0]["result"]["approval"] == "yes_flag"
    assert answers[3]["result"]["status"] == "succeeded"
    [record] = _records(xdg)
    tasks = {t["id"]: t for t in record["auto"]["plan"]["tasks"]}
    assert tasks["scan"]["state"] == "succeeded" and tasks["keep"]["state"] == "kept_by_primary"
    assert tasks["scan"]["profile"]["vendor"] == "codex" and tasks["scan"]["duration_seconds"] is not None
    assert record["auto"]["workers"][0]["state"] == "succeeded"
    assert "Secret task text" not in json.dumps(record) and '"ok"' not in json.dumps(
        record["auto"]["workers"]
    )
    assert not (xdg.state / "run" / record["id"]).exists()  # runtime files (the capability) are gone
    monitor = run_ivoai("monitor", "--json", "--all", env=dict(os.environ))
    assert monitor.returncode == 0, monitor.stderr
    shown = json.loads(monitor.stdout)
    [session] = shown["sessions"]
    assert {t["id"]: t["state"] for t in session["auto"]["tasks"]} == {
        "scan": "succeeded",
        "keep": "kept_by_primary",
    }
    assert session["auto"]["workers"][0]["state"] == "succeeded"
    codex = next(v for v in shown["quota"]["vendors"] if v["vendor"] == "codex")
    assert codex["auth"] == "authenticated" and codex["windows"][0]["used_percent"] == 12.0
    assert shown["quota"]["fuse"]["active"] == 0 and shown["quota"]["fuse"]["launches_last_hour"] == 1
    human = run_ivoai("monitor", "--all", env=dict(os.environ))
    assert human.returncode == 0 and "session\tplan\ttask\tstate\ttier\tdelegated\tduration" in human.stdout
    assert "\tapproved\tscan\tsucceeded\tstrong\tTrue\t" in human.stdout
    assert "\tscan\tsucceeded\tcodex:gpt-6.2-sol" in human.stdout and "codex\tsession\t12%" in human.stdout


def test_a_claude_primary_gets_one_settings_file_with_the_statusline_and_the_memory_hooks(
    xdg: XdgPaths,
) -> None:
    """Claude keeps only the last --settings: AUTO's statusLine and the session's hooks share one."""
    enroll_unreachable_source(xdg)  # a memory source: the session gets ivoai's memory hooks
    codex_standin(xdg, {"account": {"account": None, "requiresOpenaiAuth": True}})
    _claude_standin(xdg, logged_in=True)
    xdg.data.chmod(0o700)  # the stand-in installer's mkdir left ivoai's data root 0755
    result = run_ivoai("auto", "--planner", "claude", env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    runs = (Path(os.environ["HOME"]) / ".claude" / "ivoai-standin-runs.jsonl").read_text().splitlines()
    [primary] = [json.loads(x) for x in runs if "primary_argv" in x]
    assert sum(a == "--settings" or a.startswith("--settings=") for a in primary["primary_argv"]) == 1
    [settings] = primary["settings"]
    assert settings["statusLine"]["type"] == "command"
    assert {"SessionStart", "UserPromptSubmit", "Stop"} <= set(settings["hooks"])


def _extension(tmp_path: Path, planner: str, yes: bool = False) -> tuple[list[str], Path]:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    ext = AutoExtension(
        AutoArgs(planner, yes=yes), GateReport(planner, "x"), AutoSettings(), dict(os.environ)
    )
    args, _ = ext.client_args("ses_" + "c" * 32, str(runtime), None)
    settings = merge_claude_settings(None, getattr(ext, "claude_settings", None))
    if settings:  # as the launcher does: one private --settings file, merged with the memory hooks
        (runtime / "settings.json").write_text(json.dumps(settings))
        args.append(f"--settings={runtime / 'settings.json'}")
    return args, runtime


def test_the_real_codex_parses_the_orchestrator_server_it_is_given(xdg: XdgPaths, tmp_path: Path) -> None:
    args, _ = _extension(tmp_path, "codex")
    out = subprocess.run(
        [str(tool_path("codex")), "mcp", "list", "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    [server] = [s for s in json.loads(out.stdout) if s["name"] == "ivoai-orchestrator"]
    assert server["transport"]["type"] == "stdio" and server["transport"]["args"][:2] == [
        "-m",
        "ivoai.client.orchestration.mcp_server",
    ]
    assert server["tool_timeout_sec"] == 330


def test_the_real_claude_connects_the_orchestrator_and_asks_before_a_plan_runs(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_clients_on_path(monkeypatch)
    args, runtime = _extension(tmp_path, "claude")
    assert json.loads((runtime / "settings.json").read_text())["statusLine"]["type"] == "command"
    replies = [
        Reply("tool_use", "WaitForMcpServers"),
        Reply("tool_use", "mcp__ivoai-orchestrator__orchestration_capabilities"),
        Reply("tool_use", "mcp__ivoai-orchestrator__orchestration_plan", {"plan": plan(task("a"))}),
        Reply("answer", "done"),
    ]
    with model_stub(replies=replies) as stub:
        env = {**os.environ, **stub.claude_env()}
        proc = subprocess.run(
            [
                str(tool_path("claude")),
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--no-session-persistence",
                *args,
            ],
            input="hello",
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
            cwd=tmp_path,
            check=False,
        )
    events = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    results = [
        c
        for e in events
        if e["type"] == "user"
        for c in e["message"]["content"]
        if c["type"] == "tool_result"
    ]
    caps = json.loads(
        results[1]["content"] if isinstance(results[1]["content"], str) else results[1]["content"][0]["text"]
    )
    assert caps["session_id"] == "ses_" + "c" * 32 and caps["planner"] == "claude"  # the real server answered
    final = events[-1]
    assert final["type"] == "result"
    denied = [d["tool_name"] for d in final["permission_denials"]]
    assert denied == ["mcp__ivoai-orchestrator__orchestration_plan"]  # never pre-approved without --yes
