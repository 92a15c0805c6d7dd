"""Per-call CPU of the gateway against the bare SDK server, in process: where a tools/call's CPU goes.

    .venv/bin/python benchmarks/gateway_percall.py [--calls 800] [--rounds 3] [--concurrency 16]

Both ASGI apps of `gateway_bench.py` (the bare MCP SDK server with a no-op tool, and the real gateway
over the same seeded corpus with the hash embedder) are driven in this process, without sockets or an
HTTP parser, by `--concurrency` concurrent JSON-RPC POSTs on one event loop, so the CPU per call
(`time.process_time`, every thread of the process) is the apps' own: no load generator shares the
cores. Also timed: the service call alone (`ContextService.context_search`,
`MemoryService.memory_query`) on the calling thread.

One JSON line per figure; `cpu_ratio_vs_reference` is the reference's no-op `tools/call` CPU over the
figure's (the throughput ratio a CPU-bound server would reach). The `gateway_*` lines decompose the
call: the SDK's `tools/call` path (the reference no-op), the gateway's own per-request layers (guard,
bearer check, routing: gateway `ping` minus reference `ping`), the service call alone, and the rest
(the SDK handling a real tool's arguments and result, and the hand-off to a worker thread).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_bench as gb  # the sibling benchmark, found through the path above

HOST = b"127.0.0.1:7744"


async def drive(
    app: Any, path: str, headers: dict[str, str], bodies: list[dict[str, Any]], calls: int, concurrency: int
) -> float:
    """CPU ms per call for `calls` POSTs to `path`, `concurrency` at a time; every answer must be 200."""
    base = [
        (b"host", HOST),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
        *((k.lower().encode(), v.encode()) for k, v in headers.items()),
    ]
    failures: list[str] = []

    async def one(i: int) -> None:
        body = json.dumps({**bodies[i % len(bodies)], "jsonrpc": "2.0", "id": i}).encode()
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # no disconnect: the app finishes first
            raise AssertionError("unreachable")

        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "server": ("127.0.0.1", 7744),
            "client": ("127.0.0.1", 50000 + i % 1000),
            "headers": [*base, (b"content-length", str(len(body)).encode())],
        }
        await app(scope, receive, send)
        status = sent[0]["status"] if sent else None
        payload = b"".join(m.get("body", b"") for m in sent[1:])
        if status != 200 or b'"isError":true' in payload.replace(b" ", b""):
            failures.append(f"{path}: HTTP {status}")

    gate = asyncio.Semaphore(concurrency)

    async def gated(i: int) -> None:
        async with gate:
            await one(i)

    cpu0 = time.process_time()
    await asyncio.gather(*(gated(i) for i in range(calls)))
    cpu = time.process_time() - cpu0
    if failures:
        raise RuntimeError(f"{len(failures)} calls failed, first: {failures[0]}")
    return 1000 * cpu / calls


def direct(fn: Callable[[str], Any], calls: int) -> float:
    """CPU ms per call of a service call on this thread."""
    for q in gb.QUERIES:
        fn(q)
    cpu0 = time.process_time()
    for i in range(calls):
        fn(gb.QUERIES[i % len(gb.QUERIES)])
    return 1000 * (time.process_time() - cpu0) / calls


def tools_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"method": "tools/call", "params": {"name": name, "arguments": arguments}}


async def measure(opts: argparse.Namespace, data_root: Path, credential: str) -> dict[str, float]:
    ref = gb.reference_app()
    gateway = gb.gateway_app(data_root, 7744)
    auth = {"Authorization": f"Bearer {credential}"}
    search = [tools_call("context_search", query=q, limit=5) for q in gb.QUERIES]
    memory = [tools_call("memory_query", text=q, limit=5) for q in gb.QUERIES]
    cases: dict[str, tuple[Any, str, dict[str, str], list[dict[str, Any]]]] = {
        "reference_ping": (ref, "/mcp", {}, [{"method": "ping"}]),
        "reference_noop": (ref, "/mcp", {}, [tools_call("noop")]),
        "gateway_ping": (gateway.asgi, "/v1/mcp/context", auth, [{"method": "ping"}]),
        "gateway_context_search": (gateway.asgi, "/v1/mcp/context", auth, search),
        "gateway_memory_query": (gateway.asgi, "/v1/memory/mcp", auth, memory),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    async with ref.router.lifespan_context(ref), gateway.lifespan():
        for app, path, headers, bodies in cases.values():  # warm: imports, index open, SQLite caches
            await drive(app, path, headers, bodies, 200, opts.concurrency)
        for _ in range(opts.rounds):  # interleaved, so machine noise hits every case alike
            for name, (app, path, headers, bodies) in cases.items():
                samples[name].append(await drive(app, path, headers, bodies, opts.calls, opts.concurrency))
        context = gateway.hub.context()
        memory_service = gateway.hub.memory()
        samples["service_context_search"] = [
            direct(lambda q: context.context_search(q, limit=5), opts.calls) for _ in range(opts.rounds)
        ]
        samples["service_memory_query"] = [
            direct(lambda q: memory_service.memory_query(q, limit=5), opts.calls) for _ in range(opts.rounds)
        ]
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=800, help="calls per case and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ivoai-percall-") as tmp:
        data_root = Path(tmp) / "srv"
        credential = gb.seed(data_root)
        cpu = asyncio.run(measure(opts, data_root, credential))
    noop = cpu["reference_noop"]
    layers = cpu["gateway_ping"] - cpu["reference_ping"]
    gb.emit(
        figure="percall_reference",
        concurrency=opts.concurrency,
        ping_cpu_ms=round(cpu["reference_ping"], 3),
        noop_tools_call_cpu_ms=round(noop, 3),
    )
    gb.emit(
        figure="percall_gateway_ping",
        concurrency=opts.concurrency,
        cpu_ms=round(cpu["gateway_ping"], 3),
        cpu_ratio_vs_reference=round(cpu["reference_ping"] / cpu["gateway_ping"], 3),
    )
    for tool in ("context_search", "memory_query"):
        total = cpu[f"gateway_{tool}"]
        service = cpu[f"service_{tool}"]
        gb.emit(
            figure=f"percall_gateway_{tool}",
            concurrency=opts.concurrency,
            cpu_ms=round(total, 3),
            cpu_ratio_vs_reference=round(noop / total, 3),
            sdk_tools_call_ms=round(noop, 3),
            gateway_layers_ms=round(layers, 3),
            service_alone_ms=round(service, 3),
            rest_ms=round(total - noop - layers - service, 3),
        )


if __name__ == "__main__":
    main()
