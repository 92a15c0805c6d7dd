"""Server operations figures (issue 19), each as a ratio against a reference measured in the same run.

    .venv/bin/python benchmarks/backup_bench.py [--pages 100000] [--docs 10000] [--rounds 3]
        [--load-seconds 8] [--workers-seconds 10]

1. `backup_vs_tar`: `create_backup` of a data directory holding an N-page memory database and a
   D-document context catalog, in MiB/s of data archived, against `tar -cf` of the same files
   (config.toml, context/, memory/; both after a WAL checkpoint, page cache warm for both).
2. `restore_vs_tar`: `restore_archive(..., rebuild_index=False)` of that archive into an empty data
   directory (validation, hashes, staging, atomic renames, fsyncs) against `tar -xf` of the tar.
3. `gateway_p99_during_backup`: the gateway's p99 (`memory_read_page` / `memory_recent` on the
   100k-page database) with 4 keep-alive clients while
   backups of the same data directory run back to back in another process, against the same load
   with no backup.
4. `gateway_workers_2_vs_1`: tools/call throughput (`memory_recent` / `memory_read_page`, 16 clients)
   of `ivoai server start --workers 2` against `--workers 1` in services mode; the index and TEI are
   the tests' stand-in process (`tests/server/gateway/backends_standin.py`; no Qdrant server or TEI
   container runs here), which these calls do not touch.

The datasets are built once (bulk INSERTs through the real schemas) under `$IVOAI_BACKUP_BENCH_DIR`
(default /tmp/ivoai-backup-bench) and reused. Prints one JSON line per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORDS = [
    "request",
    "cache",
    "index",
    "query",
    "token",
    "deploy",
    "sqlite",
    "backup",
    "worker",
    "socket",
    "memory",
    "context",
    "gateway",
    "page",
    "router",
    "embed",
    "vector",
    "archive",
    "restore",
    "manifest",
    "schema",
    "journal",
    "unit",
    "timer",
    "process",
    "thread",
    "lock",
]


def _gateway_bench() -> Any:
    spec = importlib.util.spec_from_file_location("gateway_bench", ROOT / "benchmarks" / "gateway_bench.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def build(base: Path, pages: int, docs: int) -> Path:
    """The data directory with `pages` memory pages and `docs` catalog documents (cached by size)."""
    from ivoai.server.context.catalog import Catalog, ChunkRow, DocumentRecord
    from ivoai.server.datadir import ServerDataDir
    from ivoai.server.memory.service import MemoryService
    from ivoai.server.runtime.lifecycle import init_server

    data_root = base / f"data-{pages}-{docs}"
    if (data_root / ".built").exists():
        return data_root
    shutil.rmtree(data_root, ignore_errors=True)
    init_server(data_root)
    data = ServerDataDir(data_root)
    rng = random.Random(19)
    MemoryService.open(data).close()
    conn = sqlite3.connect(data.memory / "memory.sqlite3", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for first in range(0, pages, 5000):
        now = time.time()
        rows = [
            (
                f"p{i % 20}",
                f"notes/{i // 1000}/n{i}.md",
                f"Note {i}",
                json.dumps(["bench"]),
                _text(rng, 180),
                now,
                now,
            )
            for i in range(first, min(pages, first + 5000))
        ]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO pages (workspace, project, path, version, title, tags, entities, kind, body, "
            "created_at, updated_at) VALUES ('bench', ?, ?, 1, ?, ?, '[]', 'note', ?, ?, ?)",
            rows,
        )
        conn.execute("COMMIT")
        print(f"# {first + len(rows)} pages", file=sys.stderr, flush=True)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    catalog = Catalog(data.context, data.root)
    catalog.add_connector("bench", "filesystem", str(base))
    for first in range(0, docs, 500):
        batch = []
        for i in range(first, min(docs, first + 500)):
            body = _text(rng, 500)
            n = len(body)
            chunks = tuple(ChunkRow(f"{i:08d}-{k}", k, k * n // 3, (k + 1) * n // 3) for k in range(3))
            batch.append(
                DocumentRecord(
                    f"d_{i:032d}", "bench", f"src/{i // 100}/f{i}.md", n, f"h{i}", 0.0, body, chunks, {}
                )
            )
        catalog.commit_documents("bench", batch)
    catalog.close()
    c = sqlite3.connect(data.context / "catalog.sqlite3")
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    (data_root / ".built").write_text("ok")
    return data_root


def _files_bytes(data_root: Path) -> int:
    total = (data_root / "config.toml").stat().st_size
    for sub in ("context", "memory"):
        total += sum(p.stat().st_size for p in (data_root / sub).rglob("*") if p.is_file())
    return total


def _tree_cpu(pid: int) -> float:
    """User + system CPU seconds of `pid` and its live descendants (the gateway and its workers)."""
    total = 0.0
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        with open(f"/proc/{pid}/task/{pid}/children", encoding="utf-8") as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        return total
    return total + sum(_tree_cpu(c) for c in children)


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def backup_and_restore(data_root: Path, rounds: int, work: Path) -> Path:
    from ivoai.server.backup.archive import create_backup
    from ivoai.server.backup.restore import restore_archive
    from ivoai.server.datadir import ServerDataDir

    size = _files_bytes(data_root)
    mib = size / 2**20
    tar_s, ours_s, untar_s, restore_s = [], [], [], []
    archive = work / "none"
    for r in range(rounds):
        ref = work / f"ref-{r}.tar"
        t0 = time.perf_counter()
        subprocess.run(
            ["tar", "-cf", str(ref), "-C", str(data_root), "config.toml", "context", "memory"], check=True
        )
        os.sync()
        tar_s.append(time.perf_counter() - t0)
        out = work / f"ours-{r}"
        t0 = time.perf_counter()
        archive = Path(create_backup(ServerDataDir(data_root), out).archive)
        ours_s.append(time.perf_counter() - t0)

        dest = work / f"untar-{r}"
        dest.mkdir()
        t0 = time.perf_counter()
        subprocess.run(["tar", "-xf", str(ref), "-C", str(dest)], check=True)
        # fsync every extracted file and directory, as restore does
        subprocess.run(["sync", *(str(p) for p in dest.rglob("*")), str(dest)], check=True)
        untar_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        restore_archive(ServerDataDir(work / f"restored-{r}"), archive, rebuild_index=False)
        restore_s.append(time.perf_counter() - t0)
        shutil.rmtree(dest)
        shutil.rmtree(work / f"restored-{r}")
        ref.unlink()
        if r < rounds - 1:
            shutil.rmtree(out)
    tar_rate, ours_rate = mib / _median(tar_s), mib / _median(ours_s)
    emit(
        figure="backup_vs_tar",
        data_mib=round(mib, 1),
        backup_mib_s=round(ours_rate, 1),
        tar_mib_s=round(tar_rate, 1),
        ratio_vs_tar=round(ours_rate / tar_rate, 2),
        backup_s=[round(x, 2) for x in ours_s],
        tar_s=[round(x, 2) for x in tar_s],
    )
    emit(
        figure="restore_vs_tar",
        data_mib=round(mib, 1),
        restore_mib_s=round(mib / _median(restore_s), 1),
        untar_mib_s=round(mib / _median(untar_s), 1),
        ratio_vs_tar=round(_median(untar_s) / _median(restore_s), 2),
        restore_s=[round(x, 2) for x in restore_s],
        untar_s=[round(x, 2) for x in untar_s],
    )
    return archive


BACKUP_LOOP = """
import sys
from pathlib import Path
from ivoai.server.backup.archive import create_backup
from ivoai.server.datadir import ServerDataDir
import shutil
root, out = Path(sys.argv[1]), Path(sys.argv[2])
print("started", flush=True)
while True:
    create_backup(ServerDataDir(root), out)
    shutil.rmtree(out)
"""


def p99_during_backup(data_root: Path, seconds: float, work: Path) -> None:
    gb = _gateway_bench()
    from ivoai.server.auth.enrollment import EnrollmentStore

    store = EnrollmentStore(data_root, data_root / "enrollment")
    token = store.exchange(store.create_code().code).credential
    proc, port = gb.start(["_serve-gateway", str(data_root)])
    try:
        url = f"http://127.0.0.1:{port}/v1/memory/mcp"
        headers = {"Authorization": f"Bearer {token}"}
        # point reads and a recent list: cheap calls, so what a backup does to them shows
        calls: list[dict[str, Any]] = []
        for i in range(40):
            scope = {"workspace": "bench", "project": f"p{i % 20}"}
            path = f"notes/{i}/n{i * 1000 + i % 20}.md"
            calls.append({"name": "memory_read_page", "arguments": {**scope, "path": path}})
            calls.append({"name": "memory_recent", "arguments": {**scope, "limit": 10}})
        asyncio.run(gb.load(url, headers, calls, 4, 2.0))  # warm up
        idle = asyncio.run(gb.load(url, headers, calls, 4, seconds, pid=proc.pid))
        loop = subprocess.Popen(
            [sys.executable, "-c", BACKUP_LOOP, str(data_root), str(work / "loop")],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert loop.stdout is not None and loop.stdout.readline().strip() == "started"
            busy = asyncio.run(gb.load(url, headers, calls, 4, seconds, pid=proc.pid))
        finally:
            loop.send_signal(signal.SIGKILL)
            loop.wait()
            if loop.stdout is not None:
                loop.stdout.close()
        emit(
            figure="gateway_p99_during_backup",
            clients=4,
            calls="memory_read_page/memory_recent",
            idle_p99_ms=round(idle["p99_ms"], 1),
            during_p99_ms=round(busy["p99_ms"], 1),
            ratio_during_vs_idle=round(busy["p99_ms"] / idle["p99_ms"], 2),
            idle_rps=round(idle["rps"], 1),
            during_rps=round(busy["rps"], 1),
            errors=idle["errors"] + busy["errors"],
            http_5xx=idle["http_5xx"] + busy["http_5xx"],
        )
    finally:
        proc.terminate()
        proc.wait(30)


def workers_ratio(seconds: float, work: Path, rounds: int) -> None:
    gb = _gateway_bench()
    from ivoai.server.auth.enrollment import EnrollmentStore
    from ivoai.server.config import update_config
    from ivoai.server.datadir import ServerDataDir
    from ivoai.server.memory.service import MemoryService
    from ivoai.server.runtime.lifecycle import init_server

    key = "bench-standin-key-0123456789"
    port_file = work / "standin.port"
    standin = subprocess.Popen(
        [sys.executable, "-m", "tests.server.gateway.backends_standin", str(port_file), key], cwd=ROOT
    )
    try:
        while not (port_file.exists() and port_file.read_text()):
            time.sleep(0.05)
        backend = f"http://127.0.0.1:{port_file.read_text()}"
        root = work / "services"
        init_server(root, mode="services")
        data = ServerDataDir(root)
        for name in ("tei.key", "qdrant.key"):
            (data.secrets / name).write_text(key)
            (data.secrets / name).chmod(0o600)
        update_config(
            data,
            {
                "tei_url": backend,
                "tei_api_key_file": "tei.key",
                "qdrant_url": backend,
                "qdrant_api_key_file": "qdrant.key",
            },
            table_name="context",
        )
        with MemoryService.open(data) as mem:
            for i in range(200):
                mem.memory_write_page(
                    "default", "default", f"notes/n{i}.md", f"Note {i}: " + _text(random.Random(i), 60)
                )
        store = EnrollmentStore(data.root, data.enrollment)
        token = store.exchange(store.create_code().code).credential
        calls: list[dict[str, Any]] = []
        for i in range(40):
            calls.append({"name": "memory_read_page", "arguments": {"path": f"notes/n{i * 5}.md"}})
            calls.append({"name": "memory_recent", "arguments": {"limit": 10}})
        results: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
        for _ in range(rounds):
            for n in (1, 2):
                gw = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "ivoai",
                        "server",
                        "--data-dir",
                        str(root),
                        "start",
                        "--listen",
                        "127.0.0.1:0",
                        "--workers",
                        str(n),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd=ROOT,
                )
                try:
                    assert gw.stderr is not None
                    line = gw.stderr.readline()
                    port = int(line.split("listening on ", 1)[1].split(";")[0].rsplit(":", 1)[1])
                    if n > 1:
                        gw.stderr.readline()
                    url = f"http://127.0.0.1:{port}/v1/memory/mcp"
                    headers = {"Authorization": f"Bearer {token}"}
                    asyncio.run(gb.load(url, headers, calls, 16, 2.0))  # warm every worker
                    cpu0 = _tree_cpu(gw.pid)
                    res = asyncio.run(gb.load(url, headers, calls, 16, seconds))
                    res["server_cpu_ms"] = 1000 * (_tree_cpu(gw.pid) - cpu0) / max(1, res["requests"])
                    results[n].append(res)
                finally:
                    gw.send_signal(signal.SIGTERM)
                    gw.wait(60)
                    if gw.stderr is not None:
                        gw.stderr.close()
        one = _median([r["rps"] for r in results[1]])
        two = _median([r["rps"] for r in results[2]])
        emit(
            figure="gateway_workers_2_vs_1",
            clients=16,
            calls="memory_read_page/memory_recent",
            rps_workers_1=round(one, 1),
            rps_workers_2=round(two, 1),
            ratio=round(two / one, 2),
            p99_ms_workers_1=round(_median([r["p99_ms"] for r in results[1]]), 1),
            p99_ms_workers_2=round(_median([r["p99_ms"] for r in results[2]]), 1),
            server_cpu_ms_per_call_workers_1=round(_median([r["server_cpu_ms"] for r in results[1]]), 2),
            server_cpu_ms_per_call_workers_2=round(_median([r["server_cpu_ms"] for r in results[2]]), 2),
            client_cpu_ms_per_call=round(_median([r["client_cpu_ms"] for r in results[2]]), 2),
            client_cpu_share=round(_median([r["client_cpu_share"] for r in results[2]]), 2),
            machine_busy_workers_2=round(_median([r["machine_busy"] for r in results[2]]), 2),
            errors=sum(r["errors"] for rs in results.values() for r in rs),
            nproc=os.cpu_count(),
        )
    finally:
        standin.terminate()
        standin.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load-seconds", type=float, default=8.0)
    parser.add_argument("--workers-seconds", type=float, default=10.0)
    parser.add_argument("--only", choices=("backup", "p99", "workers"), default=None)
    args = parser.parse_args()
    base = Path(os.environ.get("IVOAI_BACKUP_BENCH_DIR", "/tmp/ivoai-backup-bench"))
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        work = Path(tmp)
        if args.only in (None, "backup", "p99"):
            data_root = build(base, args.pages, args.docs)
        if args.only in (None, "backup"):
            backup_and_restore(data_root, args.rounds, work)
        if args.only in (None, "p99"):
            p99_during_backup(data_root, args.load_seconds, work)
        if args.only in (None, "workers"):
            workers_ratio(args.workers_seconds, work, args.rounds)


if __name__ == "__main__":
    main()
