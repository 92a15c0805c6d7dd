"""The session statusline command, run as Claude runs it: payload on stdin, user command after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ivoai.client.orchestration._ledger import QuotaLedger
from ivoai.client.orchestration.statusline import claude_settings_fragment, user_statusline_command
from ivoai.common.paths import XdgPaths

PAYLOAD = {
    "session_id": "abc",
    "model": {"id": "claude-opus-4-8", "display_name": "Opus"},
    "cost": {"total_cost_usd": 0.12},
    "context_window": {"used_percentage": 12},
    "rate_limits": {
        "five_hour": {"used_percentage": 64, "resets_at": 4102444800},
        "seven_day": {"used_percentage": 20.5, "resets_at": "2100-01-08T00:00:00Z"},
    },
}


def _run(config: Path, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    command = claude_settings_fragment(str(config))["statusLine"]["command"]
    return subprocess.run(
        ["/bin/sh", "-c", command],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
        env=dict(os.environ),
    )


def test_the_payload_is_recorded_and_the_users_own_statusline_still_prints(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.json"
    config = tmp_path / "statusline.json"
    config.write_text(json.dumps({"user_command": f"cat > {seen}; echo my-own-line"}))
    result = _run(config, json.dumps(PAYLOAD).encode())
    assert result.returncode == 0 and result.stdout == b"my-own-line\n"
    assert json.loads(seen.read_text()) == PAYLOAD  # the user's command got the same payload
    q = QuotaLedger(xdg).view().get("claude")
    assert q.window("session") is not None and q.window("session").used_percent == 64.0  # type: ignore[union-attr]
    assert q.window("weekly") is not None and q.window("weekly").resets_at == 4102444800.0 + 7 * 86400  # type: ignore[union-attr]


def test_without_a_user_command_a_short_gauge_line_is_printed(xdg: XdgPaths, tmp_path: Path) -> None:
    result = _run(tmp_path / "missing.json", json.dumps(PAYLOAD).encode())
    assert result.returncode == 0 and result.stdout.decode() == "ivoai auto · 5h 64% · 7d 20.5%\n"


def test_a_payload_without_rate_limits_records_nothing(xdg: XdgPaths, tmp_path: Path) -> None:
    result = _run(tmp_path / "missing.json", json.dumps({"session_id": "x"}).encode())
    assert result.returncode == 0 and result.stdout == b"ivoai auto\n"
    assert not QuotaLedger(xdg).path.exists()


def test_an_oversized_payload_is_passed_on_but_not_parsed(xdg: XdgPaths, tmp_path: Path) -> None:
    big = dict(PAYLOAD, padding="x" * (64 * 1024))
    config = tmp_path / "statusline.json"
    config.write_text(json.dumps({"user_command": "wc -c"}))
    result = _run(config, json.dumps(big).encode())
    assert result.returncode == 0 and int(result.stdout) == len(json.dumps(big).encode())
    assert not QuotaLedger(xdg).path.exists()


def test_garbage_never_breaks_the_status_line(xdg: XdgPaths, tmp_path: Path) -> None:
    xdg.state.mkdir(parents=True, exist_ok=True)
    xdg.state.chmod(0o755)  # an unsafe state dir: the ledger refuses it, the status line still renders
    result = _run(tmp_path / "missing.json", json.dumps(PAYLOAD).encode())
    assert result.returncode == 0 and result.stdout == b"ivoai auto\n"
    result = _run(tmp_path / "missing.json", b"\xff not json")
    assert result.returncode == 0 and result.stdout == b"ivoai auto\n"


def test_the_users_statusline_is_found_in_their_claude_settings(tmp_path: Path) -> None:
    home = tmp_path / "h"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(
        json.dumps({"statusLine": {"type": "command", "command": "mine"}})
    )
    project = tmp_path / "p"
    assert user_statusline_command(str(project), {"HOME": str(home)}) == "mine"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.local.json").write_text(json.dumps({"statusLine": {"command": "local"}}))
    assert user_statusline_command(str(project), {"HOME": str(home)}) == "local"


def test_the_statusline_module_stays_import_light() -> None:
    code = "import sys, ivoai.client.orchestration.statusline; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert not {"pydantic", "typer", "rich", "mcp", "anyio"} & {m.split(".")[0] for m in out.stdout.split()}
