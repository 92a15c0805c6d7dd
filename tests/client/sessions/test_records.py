"""Session records: private atomic files, validated IDs, malformed records reported, PID start markers."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ivoai.client.sessions.errors import InvalidSessionIdError, SessionNotFoundError
from ivoai.client.sessions.procinfo import is_same_process, start_marker
from ivoai.client.sessions.records import SessionRecord, SessionStore, check_session_id, new_session_id
from ivoai.common.paths import XdgPaths


def _record(**overrides: object) -> SessionRecord:
    fields: dict[str, object] = {
        "id": new_session_id(),
        "executor": "codex",
        "pid": os.getpid(),
        "pid_start": start_marker(os.getpid()),
        "started_at": 1.0,
        "requested_provider": "caveman",
        "effective_provider": "direct",
        "provider_source": "default",
    }
    fields.update(overrides)
    return SessionRecord(**fields)  # type: ignore[arg-type]


def test_a_record_round_trips_as_a_private_file(xdg: XdgPaths) -> None:
    store = SessionStore(xdg)
    record = _record(knowledge_sources=["team"], bypass=True, bypass_reason="authoritative_knowledge")
    store.write(record)
    path = store.path_for(record.id)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert store.load(record.id) == record
    assert store.load(record.id).status() == "live"


@pytest.mark.parametrize("bad", ["../etc/passwd", "ses_" + "g" * 32, "ses_abc", "art_" + "a" * 32, ""])
def test_session_ids_ivoai_could_not_have_issued_are_refused_before_any_path_is_built(bad: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        check_session_id(bad)


def test_unknown_session_is_not_found(xdg: XdgPaths) -> None:
    with pytest.raises(SessionNotFoundError, match="ivoai session list"):
        SessionStore(xdg).load(new_session_id())


def test_a_malformed_record_is_reported_and_kept(xdg: XdgPaths) -> None:
    store = SessionStore(xdg)
    good = _record()
    store.write(good)
    bad_id = new_session_id()
    bad = store.path_for(bad_id)
    bad.write_text("{not json")
    bad.chmod(0o600)
    records, problems = store.list()
    assert [r.id for r in records] == [good.id]
    assert len(problems) == 1 and "invalid JSON" in problems[0]
    assert bad.exists()


def test_a_record_whose_process_is_gone_is_lost_not_live(xdg: XdgPaths) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    marker = start_marker(proc.pid)
    proc.wait()
    record = _record(pid=proc.pid, pid_start=marker or "1")
    assert record.status() == "lost"


def test_start_marker_distinguishes_a_reused_pid() -> None:
    me = os.getpid()
    marker = start_marker(me)
    assert marker is not None and marker.isdigit()
    assert is_same_process(me, marker)
    assert not is_same_process(me, str(int(marker) + 1))
    assert not is_same_process(me, None)


def test_pruning_keeps_live_records_and_the_newest_ended_ones(xdg: XdgPaths) -> None:
    store = SessionStore(xdg)
    live = _record(started_at=0.5)
    store.write(live)
    ended = [_record(state="ended", started_at=float(i + 1)) for i in range(4)]
    for r in ended:
        store.write(r)
    assert store.prune_ended(keep=2) == 2
    kept = {r.id for r in store.list()[0]}
    assert kept == {live.id, ended[3].id, ended[2].id}


def test_records_never_hold_client_arguments_or_environment(xdg: XdgPaths) -> None:
    doc = _record().to_json()
    assert not {"argv", "args", "env", "environment", "prompt", "token"} & set(doc)
    assert json.dumps(doc)


def test_the_launchers_light_record_has_exactly_the_record_fields(xdg: XdgPaths, tmp_path: Path) -> None:
    """launch.py writes records without dataclasses; they must load as SessionRecord unchanged."""
    import dataclasses

    from tests.client.agents.standins import install_client
    from tests.conftest import run_ivoai

    install_client(xdg, "codex")
    assert run_ivoai("codex", "--direct", env=dict(os.environ, STANDIN_MODE="exit:0")).returncode == 0
    [path] = list(xdg.sessions_dir.glob("ses_*.json"))
    doc = json.loads(path.read_text())
    assert set(doc) == {f.name for f in dataclasses.fields(SessionRecord)}
    assert SessionStore(xdg).load(path.stem).to_json() == doc
