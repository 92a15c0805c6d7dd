"""`ivoai session stop` signals only the recorded process, and `ivoai monitor` shows live sessions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ivoai.client.sessions.control import stop_session
from ivoai.client.sessions.errors import SessionNotRunningError
from ivoai.client.sessions.procinfo import start_marker
from ivoai.client.sessions.records import SessionRecord, SessionStore, new_session_id
from ivoai.common.paths import XdgPaths
from tests.client.agents.standins import finish, install_client, start_ivoai, wait_for, wait_line
from tests.conftest import CliRunner, run_ivoai


def _record(**fields: Any) -> SessionRecord:
    """A session record of this process (codex, direct provider) with `fields` overriding."""
    base: dict[str, Any] = {
        "id": new_session_id(),
        "executor": "codex",
        "pid": os.getpid(),
        "pid_start": start_marker(os.getpid()),
        "started_at": 1.0,
        "requested_provider": "direct",
        "effective_provider": "direct",
        "provider_source": "flag",
    }
    return SessionRecord(**(base | fields))


def test_a_stale_record_whose_pid_was_reused_is_never_signalled(xdg: XdgPaths) -> None:
    # A live process that merely has the recorded PID: its start marker differs from the record's.
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        marker = start_marker(bystander.pid)
        assert marker is not None
        store = SessionStore(xdg)
        record = _record(pid=bystander.pid, pid_start=str(int(marker) - 1))
        store.write(record)
        with pytest.raises(SessionNotRunningError, match="nothing was signalled"):
            stop_session(store, record.id)
        assert bystander.poll() is None, "the bystander was signalled"
        assert store.load(record.id).status() == "lost"
    finally:
        bystander.kill()
        bystander.wait()


def test_an_ended_session_is_not_signalled(xdg: XdgPaths, cli: CliRunner) -> None:
    store = SessionStore(xdg)
    record = _record(state="ended")
    store.write(record)
    result = cli("session", "stop", record.id)
    assert result.code == 1
    assert "already ended" in result.err


def test_stop_monitor_list_and_show_for_a_live_launched_session(xdg: XdgPaths, tmp_path: Path) -> None:
    install_client(xdg, "codex")
    env = dict(os.environ, STANDIN_MODE="trap", STANDIN_REPORT=str(tmp_path / "r.ndjson"))
    proc = start_ivoai("codex", "--direct", env=env)
    try:
        wait_line(proc, "ready")
        wait_for(
            lambda: any(xdg.sessions_dir.glob("ses_*.json")) if xdg.sessions_dir.exists() else False,
            what="the session record",
        )
        [path] = list(xdg.sessions_dir.glob("ses_*.json"))
        sid = path.stem
        wait_for(lambda: json.loads(path.read_text()).get("client_pid") is not None, what="record")
        listed = run_ivoai("session", "list", "--json")
        assert [s["id"] for s in json.loads(listed.stdout)["sessions"]] == [sid]
        shown = json.loads(run_ivoai("session", "show", sid, "--json").stdout)
        assert shown["status"] == "live" and shown["pid"] == proc.pid
        watch = run_ivoai("monitor", "--watch", "--json", "--count", "2", "--interval", "0.1")
        lines = [json.loads(line) for line in watch.stdout.splitlines()]
        assert len(lines) == 2
        [row] = lines[0]["sessions"]
        assert row["id"] == sid and row["status"] == "live" and row["effective_provider"] == "direct"
        assert row["bypass_reason"] == "direct_requested"
        assert row["last_compression"]["result"] == "started"
        stopped = run_ivoai("session", "stop", sid, "--json")
        assert stopped.returncode == 0, stopped.stderr
        assert json.loads(stopped.stdout) == {"id": sid, "signalled": True, "stopped": True}
    finally:
        code, _, err = finish(proc)
    assert code == 143, err
    final = json.loads(path.read_text())
    assert final["state"] == "ended" and final["exit_code"] == 143
    assert json.loads(run_ivoai("monitor", "--json").stdout)["sessions"] == []


def test_human_list_show_and_monitor_render_a_record_without_client_details(
    xdg: XdgPaths, cli: CliRunner
) -> None:
    store = SessionStore(xdg)
    record = _record(
        executor="claude",
        started_at=1_700_000_000.0,
        requested_provider="caveman",
        provider_source="default",
        bypass=True,
        bypass_reason="authoritative_knowledge",
        knowledge_sources=["srv_x"],
        last_compression={"result": "bypassed", "fidelity": "exact_required"},
    )
    store.write(record)
    listed = cli("session", "list")
    assert listed.code == 0, listed.err
    header, row = listed.out.splitlines()
    assert header.split("\t")[:3] == ["id", "executor", "status"]
    assert row.split("\t")[:3] == [record.id, "claude", "live"]
    assert "authoritative_knowledge" in row and "2023-11-14 22:13:20Z" in row
    shown = cli("session", "show", record.id)
    assert shown.code == 0 and "last_compression.fidelity: exact_required" in shown.out
    monitored = cli("monitor")
    assert monitored.code == 0
    assert "bypassed/exact_required" in monitored.out
    assert cli("session", "show", "ses_nope").code == 1
