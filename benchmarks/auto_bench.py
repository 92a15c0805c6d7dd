"""AUTO part 1 figures (issue 15): one JSON line per figure, each with its reference from this run.

    .venv/bin/python benchmarks/auto_bench.py [--runs N]

- auto_scheduler_12_tasks_ms_p50: validate + score + choose profiles (`evaluate_plan`, what both
  `ivoai auto plan --check` and `orchestration_plan` run) for a 12-task plan over the real
  catalogues of codex 0.171.0 and claude 2.1.197 (goal p50 <= 5 ms); reference: `json.loads` of the
  same plan text, the floor of reading it at all.
- auto_mcp_result_1mib_ratio: `tools/call orchestration_result` over the real stdio orchestrator
  MCP server (MCP SDK client) for a worker whose answer is a 1 MiB artifact, against reading those
  1 MiB from the ArtifactStore directly in this process (goal >= 0.5: direct time / MCP time).
  Also printed: the same for `orchestration_artifact_read_range` returning the whole 1 MiB.
- auto_worker_launch_added_ms_p50: from `WorkerPool.submit` to the worker's exec (a one-line sh
  script recording CLOCK_REALTIME in place of `codex`) minus the same script started by a bare
  `subprocess.Popen` (goal <= 50 ms added, p50). The pool's path includes the user-wide fuse
  (flock + JSON), `git status` of a small work tree, the private spool directory and the spawn.

Everything runs in a fresh temporary HOME/XDG tree; nothing touches the user's files.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _isolate(base: Path) -> None:
    home = base / "home"
    home.mkdir(mode=0o700)
    os.environ["HOME"] = str(home)
    for var, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
    ):
        os.environ[var] = str(base / sub)


def _p50(values: list[float]) -> float:
    return statistics.median(values)


def bench_scheduler(runs: int) -> dict[str, Any]:
    from tests.client.orchestration.plans import providers, twelve_task_plan

    from ivoai.client.orchestration._scheduler import evaluate_plan

    text = json.dumps(twelve_task_plan())
    facts = providers()
    for _ in range(20):
        evaluate_plan(json.loads(text), facts, {})
    decide, parse = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        doc = json.loads(text)
        t1 = time.perf_counter()
        report = evaluate_plan(doc, facts, {})
        t2 = time.perf_counter()
        assert report.valid and len(report.tasks) == 12
        parse.append((t1 - t0) * 1000)
        decide.append((t2 - t1) * 1000)
    return {
        "figure": "auto_scheduler_12_tasks_ms_p50",
        "value": round(_p50(decide), 3),
        "goal": "<= 5 ms",
        "reference_json_loads_ms_p50": round(_p50(parse), 4),
        "ratio_to_reference": round(_p50(decide) / _p50(parse), 1),
        "p90_ms": round(sorted(decide)[int(0.9 * len(decide))], 3),
        "runs": runs,
    }


def _standin(exec_spec: dict[str, Any]) -> Path:
    from tests.client.orchestration.support import codex_standin, fixture

    from ivoai.common.paths import xdg_paths

    return codex_standin(
        xdg_paths(),
        {
            "account": fixture("codex_account_chatgpt.json"),
            "rate_limits": fixture("codex_rate_limits_legacy.json"),
            "model_list": fixture("codex_model_list.json"),
            "exec": exec_spec,
        },
    )


async def _mcp_figures(runtime: Path, runs: int) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from tests.client.orchestration.plans import plan, task

    from ivoai.client.workingcontext import ArtifactStore

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ivoai.client.orchestration.mcp_server", "--runtime", str(runtime)],
    )
    hot = {
        "complexity": 70,
        "risk": 60,
        "verification_need": 70,
        "context_breadth": 60,
        "parallel_value": 90,
        "latency_sensitivity": 20,
    }
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        await s.call_tool("orchestration_plan", {"plan": plan(task("big", sig=hot))})
        await s.call_tool("orchestration_spawn", {"task_id": "big"})
        await s.call_tool("orchestration_wait", {"task_ids": ["big"], "mode": "all", "timeout_seconds": 120})
        first = await s.call_tool("orchestration_result", {"task_id": "big"})
        doc = first.structured_content or {}
        assert doc.get("status") == "succeeded", doc
        ref = next(r["ref"]["id"] for r in doc["result"]["refs"] if r["role"] == "output")
        store = ArtifactStore()
        session_id = "ses_" + "e" * 32
        size = store.describe(ref).size
        direct, result, ranged, floor = [], [], [], []
        for _ in range(5):  # warm both paths
            store.read(ref, session_id=session_id)
            await s.call_tool("orchestration_result", {"task_id": "big"})
        for _ in range(runs):
            t0 = time.perf_counter()
            store.read(ref, session_id=session_id)
            t1 = time.perf_counter()
            await s.call_tool("orchestration_result", {"task_id": "big"})
            t2 = time.perf_counter()
            got = await s.call_tool(
                "orchestration_artifact_read_range", {"ref": ref, "offset": 0, "length": 1024 * 1024}
            )
            t3 = time.perf_counter()
            await s.call_tool("orchestration_no_such_tool", {})  # the transport's own round trip
            floor.append(time.perf_counter() - t3)
            assert (got.structured_content or {}).get("length") == size
            direct.append(t1 - t0)
            result.append(t2 - t1)
            ranged.append(t3 - t2)
    return {
        "figure": "auto_mcp_result_1mib_ratio",
        "value": round(_p50(direct) / _p50(result), 2),
        "goal": ">= 0.5 (direct read time / MCP round trip time)",
        "artifact_bytes": size,
        "direct_read_ms_p50": round(_p50(direct) * 1000, 3),
        "mcp_result_ms_p50": round(_p50(result) * 1000, 3),
        "ratio_of_minimums": round(min(direct) / min(result), 2),
        "mcp_transport_floor_ms_p50": round(_p50(floor) * 1000, 3),
        "mcp_read_range_1mib_ms_p50": round(_p50(ranged) * 1000, 3),
        "read_range_ratio": round(_p50(direct) / _p50(ranged), 2),
        "runs": runs,
    }


def bench_mcp(base: Path, runs: int) -> dict[str, Any]:
    import anyio

    answer = json.dumps({"summary": "big", "findings": [], "state_delta": {}, "pad": "x" * 10})
    answer = answer[:-1] + ', "blob": "' + "y" * (1024 * 1024 - len(answer) - 12) + '"}'
    assert len(answer.encode()) == 1024 * 1024
    events = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "turn.completed", "usage": {}},
    ]
    _standin({"events": events, "last_message": answer})
    run = base / "run"
    run.mkdir(mode=0o700)
    (base / "repo").mkdir()
    runtime = run / "orchestrator.json"
    xdg = {v: os.environ[v] for v in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")}
    runtime.write_text(
        json.dumps(
            {
                "session_id": "ses_" + "e" * 32,
                "planner": "codex",
                "workdir": str(base / "repo"),
                "approve": True,
                "workers": 2,
                "env": {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"]},
                "xdg": xdg,
            }
        )
    )
    runtime.chmod(0o600)
    return anyio.run(_mcp_figures, runtime, runs)


def bench_launch(base: Path, runs: int) -> dict[str, Any]:
    from tests.client.orchestration.workers import git_tree

    from ivoai.client.governance import ArtifactMetrics
    from ivoai.client.orchestration._fuse import LaunchFuse
    from ivoai.client.orchestration._pool import WorkerPool
    from ivoai.client.orchestration._scoring import Tier
    from ivoai.client.orchestration._worker import WorkerIO
    from ivoai.client.orchestration._worker_spec import WorkerSpec
    from ivoai.client.workingcontext import ArtifactStore
    from ivoai.common.paths import xdg_paths

    stamps = base / "stamps"
    bindir = xdg_paths().data / "bin"
    bindir.mkdir(parents=True, mode=0o700)
    script = bindir / "codex"
    script.write_text(
        f'#!/bin/sh\ndate +%s%N >> {stamps}\ncat > /dev/null\necho \'{{"type":"turn.completed"}}\'\n'
    )
    script.chmod(0o755)
    tree = git_tree(base / "tree")
    spool = base / "spool"
    spool.mkdir(mode=0o700)
    pool = WorkerPool(
        WorkerIO(ArtifactStore(), spool, dict(os.environ), ArtifactMetrics()), LaunchFuse(), concurrency=1
    )

    def last_stamp() -> int:
        return int(stamps.read_text().split()[-1])

    bare, pooled = [], []
    try:
        for i in range(runs + 3):
            t0 = time.time_ns()
            proc = subprocess.Popen([str(script)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            proc.wait()
            b = (last_stamp() - t0) / 1e6
            spec = WorkerSpec(
                session_id="ses_" + "f" * 32,
                task_id="t",
                worker_id=f"wrk_{i}",
                vendor="codex",
                model="gpt-6.2-sol",
                effort="low",
                tier=Tier.LIGHT,
                prompt="x",
                workdir=str(tree),
            )
            t0 = time.time_ns()
            entry = pool.submit(spec)
            pool.wait([entry.id], mode="all", timeout=60)
            p = (last_stamp() - t0) / 1e6
            if i >= 3:  # warm-up
                bare.append(b)
                pooled.append(p)
    finally:
        pool.close()
    added = [p - b for p, b in zip(pooled, bare, strict=True)]
    return {
        "figure": "auto_worker_launch_added_ms_p50",
        "value": round(_p50(added), 2),
        "goal": "<= 50 ms",
        "bare_popen_to_exec_ms_p50": round(_p50(bare), 2),
        "pool_submit_to_exec_ms_p50": round(_p50(pooled), 2),
        "runs": runs,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ivoai-auto-bench-") as tmp:
        base = Path(tmp)
        _isolate(base)
        print(json.dumps(bench_scheduler(args.runs * 4)), flush=True)
        print(json.dumps(bench_launch(base, args.runs)), flush=True)
        print(json.dumps(bench_mcp(base, args.runs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
