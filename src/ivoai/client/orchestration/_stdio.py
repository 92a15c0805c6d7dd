"""Thread-free stdio for the orchestrator MCP server (what the SDK's `stdio_server` accepts as streams).

The SDK's default stdio transport wraps stdin and stdout with `anyio.wrap_file`, so every line read,
write and flush is a hand-off to a worker thread: three per tool call, which measured as most of a
`tools/call` round trip on a loaded machine. Here the wire is read and written with non-blocking
I/O on the event loop (`anyio.wait_readable` / `wait_writable`, i.e. the loop's own selector).

Like the SDK, the process's fds 0 and 1 are moved off the wire while serving (0 reads `/dev/null`,
1 writes to stderr), so a stray read or print (a library, a child) can never corrupt the protocol;
the wire lives on private duplicates that children do not inherit.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import anyio

READ_CHUNK_BYTES = 65536
LINE_MAX_BYTES = 8 * 1024 * 1024  # one JSON-RPC message; the largest answer is a 1 MiB artifact range


class LineReader:
    """`async for line in reader`: UTF-8 lines (with their newline) from a non-blocking fd."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self.fd = fd
        self.buffer = b""
        self.eof = False

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self.buffer:
            if self.eof:
                if not self.buffer:
                    raise StopAsyncIteration
                line, self.buffer = self.buffer, b""
                return line.decode("utf-8", "replace")
            try:
                chunk = os.read(self.fd, READ_CHUNK_BYTES)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            if not chunk:
                self.eof = True
                continue
            self.buffer += chunk
            if len(self.buffer) > LINE_MAX_BYTES and b"\n" not in self.buffer:
                self.buffer = b""  # an oversized message is dropped; the client sees its request time out
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace") + "\n"


class Writer:
    """`await writer.write(text)` / `await writer.flush()` on a non-blocking fd (flush is a no-op)."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self.fd = fd

    async def write(self, text: str) -> None:
        view = memoryview(text.encode("utf-8"))
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self.fd)

    async def flush(self) -> None:
        return None


@contextlib.contextmanager
def claimed_wire() -> Iterator[tuple[LineReader, Writer]]:
    """Move the wire to private fds, point 0/1 at /dev/null and stderr, restore them on exit."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
        yield LineReader(wire_in), Writer(wire_out)
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (devnull, saved_in, saved_out, wire_in, wire_out):
            with contextlib.suppress(OSError):
                os.close(fd)
