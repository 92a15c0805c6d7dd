"""The CLI through a running gateway's admin socket (issue 13 item 1), and memory vectors (item 2).

A real `ivoai server start` process holds the Qdrant Edge shard; `ivoai server context search|status`
and `ivoai server ingest` used to fail with "the context index ... is open in another process".
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ivoai.server.datadir import ServerDataDir
from ivoai.server.runtime.admin import socket_path
from ivoai.server.runtime.runstate import read_run_state
from tests.conftest import CliRunner
from tests.server.context.conftest import write_tree

DOCS = {
    "deploy.md": "Deploying the billing service: build the container, then run the migration job.\n",
    "lunch.md": "The cafeteria serves lentil soup on Thursdays.\n",
}
STARTUP_TIMEOUT = 120.0


def _wait_for(predicate: object, timeout: float) -> bool:
    """Poll `predicate()` until true or `timeout` seconds passed (bounded, event-paced)."""
    tick = threading.Event()
    for _ in range(int(timeout / 0.05)):
        if predicate():  # type: ignore[operator]
            return True
        tick.wait(0.05)
    return False


@pytest.fixture
def served(tmp_path: Path, cli: CliRunner) -> Iterator[tuple[tuple[str, ...], Path, subprocess.Popen[str]]]:
    """A data dir with one phase-1-ingested connector, served by a real `ivoai server start` process."""
    data = tmp_path / "srv"
    base = ("server", "--data-dir", str(data))
    root = write_tree(tmp_path / "docs", DOCS)
    assert (
        cli(*base, "connector", "add", "--name", "docs", "--type", "filesystem", "--path", str(root)).code
        == 0
    )
    assert cli(*base, "ingest", "--lexical-only").code == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "ivoai", *base, "start", "--listen", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    dd = ServerDataDir(data)
    try:
        up = _wait_for(
            lambda: read_run_state(dd) is not None and os.path.exists(socket_path(dd)), STARTUP_TIMEOUT
        )
        assert up, proc.stderr.read() if proc.poll() is not None and proc.stderr else "gateway did not start"
        yield base, tmp_path, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_context_search_status_and_ingest_go_through_the_running_gateway(
    served: tuple[tuple[str, ...], Path, subprocess.Popen[str]], cli: CliRunner
) -> None:
    base, tmp_path, proc = served
    sock = Path(socket_path(ServerDataDir(Path(base[2]))))
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    r = cli(*base, "context", "search", "migration job for the billing container", "--json")
    assert r.code == 0, r.err
    assert "open in another process" not in r.err
    found = json.loads(r.out)
    assert found["results"][0]["path"] == "deploy.md" and "coverage" in found
    text = cli(*base, "context", "search", "migration job for the billing container")
    assert text.code == 0 and "docs:deploy.md  chunk 0" in text.out
    # a new connector, ingested through the gateway: phase 1 there, phase 2 by its background work
    more = write_tree(tmp_path / "more", {"router.md": "Reboot the router whenever the wireless drops.\n"})
    assert (
        cli(*base, "connector", "add", "--name", "more", "--type", "filesystem", "--path", str(more)).code
        == 0
    )
    ing = cli(*base, "ingest", "--connector", "more", "--json")
    assert ing.code == 0, ing.err
    report = json.loads(ing.out)
    assert report["connectors"][0]["added"] == 1 and report["embedding"] == "done"
    assert report["coverage"]["pending_chunks"] == 0
    status = json.loads(cli(*base, "context", "status", "--json").out)
    assert (status["documents"], status["total_chunks"]) == (3, 3)
    assert status["embedding"] == "complete" and status["pending_chunks"] == 0
    hit = json.loads(cli(*base, "context", "search", "restart modem if wifi fails", "--json").out)["results"][
        0
    ]
    assert (hit["path"], hit["embedded"]) == ("router.md", True)
    missing = cli(*base, "ingest", "--connector", "ghost")
    assert missing.code == 1 and "no connector named 'ghost'" in missing.err
    assert proc.poll() is None


def test_memory_pages_written_by_the_cli_get_vectors_from_the_running_gateway(
    served: tuple[tuple[str, ...], Path, subprocess.Popen[str]], cli: CliRunner
) -> None:
    base, tmp_path, _ = served
    page = tmp_path / "page.md"
    page.write_text("Reboot the router whenever the wireless connection drops.\n")
    assert cli(*base, "memory", "write", "notes/router.md", "--file", str(page)).code == 0

    def embedded() -> bool:
        status = json.loads(cli(*base, "memory", "status", "--json").out)
        return bool(status["pages"] == status["embedded_pages"] == 1)

    assert _wait_for(embedded, STARTUP_TIMEOUT)


def test_memory_pages_written_by_the_cli_without_a_server_get_vectors_at_once(
    tmp_path: Path, cli: CliRunner
) -> None:
    base = ("server", "--data-dir", str(tmp_path / "srv"))
    page = tmp_path / "page.md"
    page.write_text("Lentil soup is served on Thursdays.\n")

    def hook(n: int) -> None:
        event = {
            "idempotency_key": f"k-{n}",
            "event": "session_start",
            "session_id": f"s-{n}",
            "workspace": "default",
            "cwd": str(tmp_path),
        }
        done = subprocess.run(
            [sys.executable, "-m", "ivoai", *base, "memory", "hook"],
            input=json.dumps(event),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    hook(1)
    status = json.loads(cli(*base, "memory", "status", "--json").out)
    assert (status["pages"], status["embedded_pages"]) == (1, 0)  # the hook intake stays fast: no model
    embedded = json.loads(cli(*base, "memory", "embed", "--json").out)
    assert embedded == {"embedded": 1, "embedded_pages": 1, "pages": 1}
    hook(2)
    wrote = cli(*base, "memory", "write", "notes/soup.md", "--file", str(page))
    assert wrote.code == 0 and "embedded 1 other pages" in wrote.err  # the second hook page
    status = json.loads(cli(*base, "memory", "status", "--json").out)
    assert (status["pages"], status["embedded_pages"]) == (3, 3)
    found = json.loads(cli(*base, "memory", "query", "what soup is on the menu", "--json").out)
    assert found["hits"] and found["hits"][0]["path"] == "notes/soup.md"
