"""The primary's limit signals, read from what the real `claude` and `codex` binaries write.

Both clients run against the scripted model service on loopback (model_stub.py), which answers
HTTP 429 `usage_limit_reached` like the vendors' services do at a usage limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ivoai.client.agents.session_extras import merge_claude_settings
from ivoai.client.orchestration._auto import AutoArgs, AutoExtension, GateReport
from ivoai.client.orchestration._classify import LimitKind, classify
from ivoai.client.orchestration._reap import process_tree
from ivoai.client.orchestration._settings import AutoSettings
from ivoai.client.orchestration._signals import ClaudeHookSource, CodexRolloutSource, JsonlTail, open_rollouts
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.model_stub import ModelStub, Reply, model_stub
from tests.client.orchestration.workers import wait_for
from tests.conftest import tool_path


def test_the_real_claude_runs_the_supervisor_hooks_of_the_one_settings_file(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    ext = AutoExtension(AutoArgs("claude"), GateReport("claude", "codex"), AutoSettings(), dict(os.environ))
    args, _ = ext.client_args("ses_" + "c" * 32, str(runtime), None)
    settings = merge_claude_settings({"hooks": {"Stop": []}}, ext.claude_settings)  # as the launcher merges
    assert settings is not None and {"SessionStart", "StopFailure", "Stop"} <= set(settings["hooks"])
    (runtime / "settings.json").write_text(json.dumps(settings))
    session_id = args[args.index("--session-id") + 1]
    with model_stub(replies=[Reply("usage_limit")] * 4) as stub:
        env = {**os.environ, **stub.claude_env(), "CLAUDE_CODE_MAX_RETRIES": "0"}
        proc = subprocess.run(
            [str(tool_path("claude")), "-p", "--output-format", "json", "--no-session-persistence",
             f"--settings={runtime / 'settings.json'}", "--session-id", session_id, "hello"],
            capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path, check=False,
        )  # fmt: skip
    assert json.loads(proc.stdout)["api_error_status"] == 429
    source = ClaudeHookSource(str(runtime))
    [signal] = source.poll()
    assert signal.vendor == "claude" and signal.message.startswith("rate_limit: API Error")
    assert classify(signal).kind is LimitKind.UNCONFIRMED  # words only: the quota must be re-read
    assert source.conversation is not None and source.conversation.id == session_id
    events = [e["hook_event_name"] for e in source.events]
    assert events == ["SessionStart", "StopFailure"]


def test_a_usage_limit_in_a_real_codex_rollout_is_a_signal_with_its_thread(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()

    def base(stub: ModelStub) -> list[str]:
        return [str(tool_path("codex")), "exec", "--json", "--skip-git-repo-check", "-m", "test-model",
                *stub.codex_args()]  # fmt: skip

    with model_stub(replies=[Reply("hang")] * 4) as stub:
        env = {**os.environ, **stub.codex_env(), "HOME": str(home)}
        hanging = subprocess.Popen(
            [*base(stub), "wait"], env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, process_group=0,
        )  # fmt: skip
        try:
            assert hanging.stdout is not None
            started = json.loads(hanging.stdout.readline())
            found: list[tuple[str, str]] = []

            def located() -> bool:
                found.extend(open_rollouts([p for p, _ in process_tree(hanging.pid)]))
                return bool(found)

            wait_for(located)
            assert found[0][1] == started["thread_id"]  # the exact conversation, from the open file
        finally:
            os.killpg(hanging.pid, 9)
            hanging.wait()
            hanging.stdout.close()  # type: ignore[union-attr]
    with model_stub(replies=[Reply("usage_limit")] * 2) as stub:
        done = subprocess.run(
            [*base(stub), "hello"], env={**env, **stub.codex_env()}, cwd=tmp_path, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    thread = json.loads(done.stdout.splitlines()[0])["thread_id"]
    [rollout] = list((home / ".codex" / "sessions").rglob(f"rollout-*-{thread}.jsonl"))
    source = CodexRolloutSource()
    source.tail = JsonlTail(str(rollout))
    [signal] = source.poll()
    assert (
        signal.vendor == "codex" and "hit your usage limit" in signal.message and source.limit_id == "codex"
    )
    verdict = classify(signal)
    assert verdict.kind is LimitKind.UNCONFIRMED


def test_the_tail_reads_only_whole_new_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b":')
    tail = JsonlTail(str(path))
    assert list(tail.lines()) == [{"a": 1}]
    with open(path, "ab") as fh:
        fh.write(b' 2}\nnot json\n{"c": 3}\n')
    assert list(tail.lines()) == [{"b": 2}, {"c": 3}]
    assert list(tail.lines()) == []


def test_the_hook_command_keeps_a_bounded_line_and_never_fails(tmp_path: Path) -> None:
    from ivoai.client.orchestration import primary_hook
    from ivoai.common.limits import AUTO_HOOK_PAYLOAD_MAX_BYTES

    assert primary_hook.PAYLOAD_MAX_BYTES == AUTO_HOOK_PAYLOAD_MAX_BYTES
    events = tmp_path / "events.jsonl"
    payload = {"hook_event_name": "StopFailure", "session_id": "s1", "error": "rate_limit",
               "last_assistant_message": "x" * 5000, "prompt": "secret user prompt"}  # fmt: skip
    for data in (json.dumps(payload), "not json", "{" + " " * (70 * 1024) + "}"):
        done = subprocess.run(
            [sys.executable, "-m", "ivoai.client.orchestration.primary_hook", str(events)],
            input=data.encode(), capture_output=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0 and done.stdout == b""
    [line] = [json.loads(x) for x in events.read_text().splitlines()]
    assert line["error"] == "rate_limit" and len(line["message"]) == 512 and "prompt" not in line
    assert oct(events.stat().st_mode & 0o777) == "0o600"
