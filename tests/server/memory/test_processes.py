"""Two processes writing one database: optimistic concurrency holds across process boundaries."""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Barrier
from pathlib import Path
from queue import Empty

from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory.errors import MemoryConflictError
from ivoai.server.memory.service import MemoryService


def _racer(root: str, name: str, barrier: Barrier, results: multiprocessing.Queue[str]) -> None:
    with MemoryService.open(ServerDataDir(Path(root))) as svc:
        svc.memory_status()  # connection open and schema checked before the race starts
        barrier.wait(timeout=60)
        try:
            svc.memory_write_page("w", "p", "race.md", f"written by {name}", expected_version=1)
            results.put(f"won:{name}")
        except MemoryConflictError:
            results.put("conflict")


def test_two_processes_racing_with_the_same_expected_version_leave_exactly_one_winner(
    data_dir: ServerDataDir,
) -> None:
    with MemoryService.open(data_dir) as svc:
        svc.memory_write_page("w", "p", "race.md", "base")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    results: multiprocessing.Queue[str] = ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(str(data_dir.root), n, barrier, results)) for n in ("a", "b")]
    for p in procs:
        p.start()
    outcomes = []
    try:
        for _ in procs:
            outcomes.append(results.get(timeout=120))
    except Empty:
        raise AssertionError(f"a racer did not report; got {outcomes}") from None
    finally:
        for p in procs:
            p.join(timeout=60)
    assert sorted(o.split(":")[0] for o in outcomes) == ["conflict", "won"]
    winner = next(o.split(":")[1] for o in outcomes if o.startswith("won"))
    with MemoryService.open(data_dir) as svc:
        page = svc.memory_read_page("w", "p", "race.md")
    assert (page.version, page.body) == (2, f"written by {winner}")
    assert all(p.exitcode == 0 for p in procs)
