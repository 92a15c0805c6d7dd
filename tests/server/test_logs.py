"""`ivoai server logs`: the foreground log file, `--since`, `--follow`, always redacted."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ivoai.server.datadir import ServerDataDir
from ivoai.server.logs import attach_log_file, log_path, parse_since
from tests.conftest import REPO_ROOT, CliRunner

SECRET = "Authorization: Bearer abcdEFGH12345678ijkl"


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerDataDir]:
    monkeypatch.delenv("INVOCATION_ID", raising=False)
    d = ServerDataDir(tmp_path / "srv").ensure()
    loggers = [logging.getLogger(n) for n in ("", "uvicorn", "ivoai")]
    before = [(list(lg.handlers), lg.level) for lg in loggers]
    yield d
    for lg, (handlers, level) in zip(loggers, before, strict=True):
        for h in lg.handlers:
            if h not in handlers:
                h.close()
        lg.handlers[:] = handlers
        lg.setLevel(level)


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def test_log_records_are_redacted_when_written_and_lines_again_when_shown(
    data: ServerDataDir, cli: CliRunner
) -> None:
    attach_log_file(data)
    logging.getLogger("ivoai.gateway").info("upstream said %s", SECRET)
    raw = log_path(data).read_text()
    assert "abcdEFGH12345678ijkl" not in raw and "[REDACTED]" in raw
    with open(log_path(data), "a", encoding="utf-8") as f:  # a line that bypassed logging
        f.write(f"{_stamp(datetime.now(UTC))} ERROR traceback: {SECRET}\n")
    r = cli("server", "--data-dir", str(data.root), "logs")
    assert r.code == 0 and "upstream said" in r.out
    assert "abcdEFGH12345678ijkl" not in r.out and r.out.count("[REDACTED]") == 2


def test_since_keeps_only_newer_lines_and_accepts_durations_or_iso_times(
    data: ServerDataDir, cli: CliRunner
) -> None:
    now = datetime.now(UTC)
    log_path(data).write_text(
        f"{_stamp(now - timedelta(hours=3))} INFO old line\n"
        f"{_stamp(now - timedelta(minutes=5))} INFO recent line\n"
        "  continuation of the recent line\n"
    )
    r = cli("server", "--data-dir", str(data.root), "logs", "--since", "1h")
    assert r.out.splitlines() == [
        f"{_stamp(now - timedelta(minutes=5))} INFO recent line",
        "  continuation of the recent line",
    ]
    assert parse_since("2026-01-02T03:04:05") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    bad = cli("server", "--data-dir", str(data.root), "logs", "--since", "yesterday")
    assert bad.code == 1 and "--since" in bad.err


def test_follow_prints_lines_appended_later(data: ServerDataDir) -> None:
    path = log_path(data)
    path.write_text("first line\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ivoai", "server", "--data-dir", str(data.root), "logs", "--follow"],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "first line\n"
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"later: {SECRET}\n")
        assert proc.stdout.readline() == "later: Authorization: Bearer [REDACTED]\n"
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()
