"""Client CPU per request of ivoai's two latency-critical HTTP clients, against references, same run.

One JSON line per figure. Each client variant runs in its own process (so a `--baseline-src` tree
can be imported beside this one) and reports its own CPU time (`time.process_time`, all threads)
over a batch of sequential requests; batches of all variants are interleaved round by round and the
figure is the median over rounds, in ms per request. The servers run in other processes.

1. `router_transport_cpu_ms_per_request`: one JSON-RPC-sized POST answered by 4 KiB of JSON over a
   kept-alive loopback connection, through the router's upstream transport
   (`client/knowledge/http1.Http11Transport`), awaited on asyncio as the router does. References:
   `httpx2.AsyncHTTPTransport` (what the router used before its lean transport) and, with
   `--baseline-src`, the baseline tree's `Http11Transport`.
2. `tei_client_cpu_ms_per_query_embedding`: `TeiEmbedder.embed_queries([query])` of this tree against
   the router benchmark's stand-in embedding service (TEI's `POST /embed`, its own process), i.e.
   request, JSON, vector checks and normalization. References: the same request and checks through an
   `httpx2.Client` and an `httpx.Client` (what the TEI client used before its lean transport) and,
   with `--baseline-src`, the baseline tree's `TeiEmbedder`.

`gain_kept` = (reference - this tree) / (reference - baseline): the share of the baseline's measured
gain over the ordinary client that this tree keeps (1.0 = all of it).

Run: .venv/bin/python benchmarks/http_clients.py [--rounds N] [--batch N] [--baseline-src DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ANSWER = json.dumps(
    {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "x" * 4000}]}}
)
REQUEST = json.dumps(
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "context_search", "arguments": {}}}
)

# The client side, run as `python -c CLIENT VARIANT URL` with PYTHONPATH at the tree under test. It
# answers each "N" line on stdin with the CPU seconds N requests took.
CLIENT = r"""
import asyncio, json, sys, time
variant, url = sys.argv[1], sys.argv[2]
REQUEST = sys.argv[3].encode()
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}

def router_runner(make):
    import httpx2
    loop = asyncio.new_event_loop()
    transport = loop.run_until_complete(make())
    target = httpx2.URL(url + "/mcp")
    async def batch(n):
        for _ in range(n):
            request = httpx2.Request("POST", target, headers=HEADERS, content=REQUEST)
            response = await transport.handle_async_request(request)
            await response.aread()
            await response.aclose()
    return lambda n: loop.run_until_complete(batch(n))

def tei_runner_ivoai():
    from ivoai.server.context.embeddings import TeiEmbedder
    tei = TeiEmbedder(url, api="tei")
    return lambda n: [tei.embed_queries(["which team owns the migration plan"]) for _ in range(n)]

def tei_runner_client(module):
    import importlib, math
    from ivoai.server.context.embeddings import _check_vectors, _normalize
    lib = importlib.import_module(module)
    client = lib.Client(timeout=120, trust_env=False, follow_redirects=False)
    def one():
        body = json.dumps({"inputs": ["query: which team owns the migration plan"], "normalize": True,
                           "truncate": True}, ensure_ascii=False, separators=(",", ":")).encode()
        response = client.post(url + "/embed", content=body,
                               headers={"content-type": "application/json", "accept": "application/json"})
        response.raise_for_status()
        return _normalize(_check_vectors(json.loads(response.content), 1, 384, "svc"))
    return lambda n: [one() for _ in range(n)]

if variant == "router-lean":
    from ivoai.client.knowledge.http1 import Http11Transport
    async def make():
        return Http11Transport(url)
    run = router_runner(make)
elif variant == "router-httpx2":
    import socket, httpx2
    async def make():
        return httpx2.AsyncHTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    run = router_runner(make)
elif variant == "tei-ivoai":
    run = tei_runner_ivoai()
else:
    run = tei_runner_client(variant.removeprefix("tei-"))
run(50)  # warm: connections, imports, caches
print("ready", flush=True)
for line in sys.stdin:
    n = int(line)
    start = time.process_time()
    run(n)
    print(time.process_time() - start, flush=True)
"""


class _Client:
    def __init__(self, label: str, variant: str, url: str, src: Path) -> None:
        self.label = label
        env = {**os.environ, "PYTHONPATH": str(src)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT, variant, url, REQUEST],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{label}: the client process did not start")
        self.per_request_ms: list[float] = []

    def batch(self, n: int) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        self.per_request_ms.append(float(self.proc.stdout.readline()) * 1000 / n)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


@contextlib.contextmanager
def _json_server() -> Iterator[str]:
    """A loopback HTTP/1.1 server answering every request with ANSWER, kept alive, in a thread."""
    body = ANSWER.encode()
    answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
    loop = asyncio.new_event_loop()
    ready: list[int] = []
    started = threading.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                writer.write(answer + body)
                await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        ready.append(server.sockets[0].getsockname()[1])
        started.set()
        await asyncio.Event().wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    started.wait(10)
    yield f"http://127.0.0.1:{ready[0]}"


def _measure(clients: list[_Client], rounds: int, batch: int) -> None:
    for i in range(rounds):
        order = clients[i % len(clients) :] + clients[: i % len(clients)]
        for client in order:
            client.batch(batch)


def _emit(figure: str, clients: list[_Client], reference: str, rounds: int, batch: int) -> None:
    medians = {c.label: round(statistics.median(c.per_request_ms), 4) for c in clients}
    line: dict[str, Any] = {
        "figure": figure,
        "rounds": rounds,
        "requests_per_round": batch,
        "cpu_ms_per_request": medians,
        "ratio_vs_reference": round(medians["this"] / medians[reference], 3),
    }
    if "baseline" in medians:
        line["ratio_vs_baseline"] = round(medians["this"] / medians["baseline"], 3)
        gain = medians[reference] - medians["baseline"]
        line["gain_kept"] = round((medians[reference] - medians["this"]) / gain, 3) if gain > 0 else None
    sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--batch", type=int, default=400)
    parser.add_argument("--baseline-src", help="also measure this source tree (has src/ivoai)")
    opts = parser.parse_args()
    here = ROOT / "src"
    baseline = Path(opts.baseline_src).resolve() / "src" if opts.baseline_src else None

    with _json_server() as url:
        variants = [("this", "router-lean", here), ("httpx2_transport", "router-httpx2", here)]
        if baseline is not None:
            variants.append(("baseline", "router-lean", baseline))
        clients = [_Client(label, variant, url, src) for label, variant, src in variants]
        try:
            _measure(clients, opts.rounds, opts.batch)
        finally:
            for client in clients:
                client.close()
        _emit("router_transport_cpu_ms_per_request", clients, "httpx2_transport", opts.rounds, opts.batch)

    from benchmarks.router_bench import _stand_in_process

    with _stand_in_process() as stand_in:
        variants = [
            ("this", "tei-ivoai", here),
            ("httpx2_client", "tei-httpx2", here),
            ("httpx_client", "tei-httpx", here),
        ]
        if baseline is not None:
            variants.append(("baseline", "tei-ivoai", baseline))
        clients = [_Client(label, variant, stand_in.url, src) for label, variant, src in variants]
        try:
            _measure(clients, opts.rounds, opts.batch // 2)
        finally:
            for client in clients:
                client.close()
        _emit("tei_client_cpu_ms_per_query_embedding", clients, "httpx_client", opts.rounds, opts.batch // 2)


if __name__ == "__main__":
    main()
