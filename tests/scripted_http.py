"""A scripted loopback HTTP/1.1 peer for client transport tests: each test states byte for byte what
the server sends (framing, interim answers, kept-alive and closed connections, malformed heads)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

from ivoai.client.knowledge.http1 import RESPONSE_HEAD_MAX_BYTES

Reply = Callable[["Received"], bytes]


@dataclass
class Received:
    connection: int
    head: bytes
    body: bytes


@dataclass
class Scripted:
    """Loopback HTTP/1.1 peer: answers each request with `reply(request)`; closes after it when told."""

    reply: Reply
    close_after_reply: bool = False
    port: int = 0
    received: list[Received] = field(default_factory=list)
    connections: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        self.writers.append(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                request = Received(number, head, body)
                self.received.append(request)
                writer.write(self.reply(request))
                await writer.drain()
                if self.close_after_reply:
                    return
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def serving(peer: Scripted, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    server = await asyncio.start_server(peer.handle, "127.0.0.1", 0, ssl=tls)
    peer.port = server.sockets[0].getsockname()[1]
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{peer.port}"
    finally:
        for writer in peer.writers:
            writer.close()
        server.close()


def json_reply(body: bytes = b'{"ok":true}', extra: bytes = b"") -> Reply:
    return lambda _: (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n"
        + extra
        + b"\r\n"
        + body
    )


@contextlib.contextmanager
def serving_in_thread(peer: Scripted, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """`serving` on an event loop of its own thread, for blocking clients; yields the base URL."""
    loop = asyncio.new_event_loop()
    ready: list[str] = []
    started, stop = threading.Event(), asyncio.Event()

    async def main() -> None:
        async with serving(peer, tls) as url:
            ready.append(url)
            started.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    try:
        assert started.wait(10), "the scripted peer did not start"
        yield ready[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


# Answers every client transport must refuse with httpx2.RemoteProtocolError matching the message.
MALFORMED_ANSWERS: list[tuple[bytes, str]] = [
    (b"", "without sending a response"),
    (b"HTTP/2 200 OK\r\n\r\n", "malformed status line"),
    (b"HTTP/1.1 200 OK\r\n bad: fold\r\n\r\n", "malformed header"),
    (b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n", "transfer coding"),
    (b"HTTP/1.1 101 Switching\r\n\r\n", "protocol switch"),
    (
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 40\r\n\r\nok",
        "conflicting Content-Length",
    ),
    (b"HTTP/1.1 200 OK\r\ncontent-length: 2, 40\r\n\r\nok", "conflicting Content-Length"),
    (
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        "Content-Length and Transfer-Encoding",
    ),
    (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        "Content-Length and Transfer-Encoding",
    ),
    (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        "transfer coding",
    ),
    (
        b"HTTP/1.1 200 OK\r\nx: " + b"a" * RESPONSE_HEAD_MAX_BYTES + b"\r\n\r\n",
        f"over {RESPONSE_HEAD_MAX_BYTES} bytes",
    ),
]
MALFORMED_IDS = [
    "no-answer",
    "http2-line",
    "folded-header",
    "bad-length",
    "gzip",
    "upgrade",
    "two-lengths",
    "length-list",
    "length-then-chunked",
    "chunked-then-length",
    "gzip-then-chunked",
    "huge-head",
]
