"""Conservation: a fresh window at or below the threshold asks before routing on; nothing silent.

The low window comes from the logged-in codex stand-in's app-server (a rate-limit answer validated
against the installed Codex's schema); the primaries are the stand-ins, which record their argv.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import mcp.types as t
import pytest

from ivoai.client.orchestration._conserve import LowWindow, decide_gate, low_windows
from ivoai.client.orchestration._quota import QuotaWindow, VendorQuota
from ivoai.common.paths import XdgPaths
from tests.cli.test_auto_failover import LOGGED_IN, _claude, _claude_primaries, _records, _repo
from tests.client.orchestration.codex_standin import FIXTURE_EPOCH
from tests.client.orchestration.plans import CODEX_SCHEMA, plan, task
from tests.client.orchestration.support import codex_standin

LOW = {"rateLimits": {"primary": {"resetsAt": FIXTURE_EPOCH + 3600, "usedPercent": 95,
                                  "windowDurationMins": 300}, "secondary": None}}  # fmt: skip
HOT = {"complexity": 70, "risk": 60, "verification_need": 70, "context_breadth": 60, "parallel_value": 90,
       "latency_sensitivity": 20}  # fmt: skip


def _low_codex(xdg: XdgPaths, **script: Any) -> Path:
    schema = json.loads((CODEX_SCHEMA / "GetAccountRateLimitsResponse.json").read_text())
    jsonschema.Draft7Validator(schema).validate(LOW)
    return codex_standin(xdg, {**LOGGED_IN, "rate_limits": LOW, **script})


def _codex_primaries(home: Path) -> list[list[str]]:
    lines = (home / "ivoai-standin-requests.jsonl").read_text().splitlines()
    return [json.loads(x)["primary_argv"] for x in lines if "primary_argv" in x]


def test_only_fresh_authoritative_account_windows_at_the_threshold_count() -> None:
    now = 1_000_000.0
    windows = (
        QuotaWindow("codex", "session", 95.0, now + 60, 300, "codex_app_server", now),
        QuotaWindow("codex", "weekly", 50.0, now + 60, 10080, "codex_app_server", now),
        QuotaWindow("codex", "weekly", 99.0, now + 60, 10080, "codex_app_server", now, model="gpt-6.2-sol"),
        QuotaWindow("codex", "monthly", 99.0, now + 60, None, "codex_app_server", now - 3600),  # stale
    )
    [low] = low_windows(VendorQuota("codex", windows=windows), 10, 45, now)
    assert (low.kind, low.remaining) == ("session", 5.0)
    assert low_windows(VendorQuota("codex", windows=windows), 4, 45, now) == []


def test_nothing_is_switched_without_an_answer() -> None:
    window = LowWindow("codex", "session", 5.0, None)
    kept = decide_gate(window, "claude", True, ask=lambda q: None)
    assert kept.choice == "keep" and kept.asked == "non_interactive" and "nothing was switched" in kept.note
    assert decide_gate(window, "claude", True, ask=lambda q: "conserve").choice == "conserve"
    no_alt = decide_gate(window, "claude", False, ask=lambda q: "conserve")
    assert no_alt.choice == "keep" and "cannot run" in no_alt.note


def test_a_non_interactive_auto_keeps_the_planner_and_says_so(xdg: XdgPaths, tmp_path: Path) -> None:
    home = _low_codex(xdg)
    claude_home = _claude(xdg)
    result = subprocess.run(
        [sys.executable, "-m", "ivoai", "auto", "--yes"], cwd=_repo(tmp_path), capture_output=True, text=True,
        timeout=240, env=dict(os.environ), stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "conservation: codex session window has 5 % left" in result.stderr
    assert (
        "not a terminal, so the safe default applies: codex is kept and nothing was switched" in result.stderr
    )
    assert len(_codex_primaries(home)) == 1 and _claude_primaries(claude_home) == []
    [record] = _records(xdg)
    assert record["auto"]["gate"]["conservation"]["choice"] == "keep"
    assert record["auto"]["gate"]["conservation"]["asked"] == "non_interactive"


def test_on_a_terminal_the_user_can_conserve_and_the_alternate_starts(xdg: XdgPaths, tmp_path: Path) -> None:
    home = _low_codex(xdg)
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
        [sys.executable, "-c", boot, slave_name], cwd=_repo(tmp_path), env=dict(os.environ),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    seen = b""
    answered = False
    deadline = time.monotonic() + 180
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([master], [], [], 0.05)[0]:
                try:
                    seen += os.read(master, 65536)
                except OSError:  # EIO until the child opened its side of the terminal
                    time.sleep(0.02)
            if not answered and b"[k]eep / [c]onserve:" in seen:
                os.write(master, b"c\n")
                answered = True
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert answered and code == 0, seen.decode("utf-8", "replace")[-2000:]
    assert _codex_primaries(home) == [] and len(_claude_primaries(claude_home)) == 1
    [record] = _records(xdg)
    assert record["executor"] == "claude" and record["auto"]["gate"]["conservation"]["choice"] == "conserve"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["conserve", None])
async def test_workers_on_a_low_window_are_asked_about_through_elicitation(
    xdg: XdgPaths, tmp_path: Path, answer: str | None
) -> None:
    from tests.client.orchestration.test_mcp_server import _call, _client, _runtime

    _low_codex(xdg)
    _claude(xdg, logged_in=False)  # codex is the only client workers could use
    asked: list[str] = []

    async def elicit(ctx: Any, params: t.ElicitRequestParams) -> t.ElicitResult:
        asked.append(params.message)
        if "Conserve it" in params.message:
            return t.ElicitResult(action="accept", content={"conserve": True})
        return t.ElicitResult(action="accept", content={"approve": True})

    kwargs = {"elicitation_callback": elicit} if answer == "conserve" else {}
    async with _client(_runtime(xdg, tmp_path), **kwargs) as s:
        planned = await _call(s, "orchestration_plan", plan=plan(task("scan", sig=HOT)))
    [scan] = planned["tasks"]
    [note] = planned["conservation"]
    assert note.startswith("conservation: codex session window has 5 % left")
    if answer == "conserve":
        assert asked and "codex session window has 5 % left" in asked[0]
        assert scan["profile"] is None and scan["delegated"] is False  # spared: the primary keeps it
        assert "you chose to conserve" in note
    else:
        assert scan["profile"]["vendor"] == "codex" and "nothing was switched" in note
