"""Reading a whole ASGI request body once and handing it on (the guard's bound, the gate's tool check)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from starlette.types import Message, Receive

from ivoai.common.errors import TooLargeError


@dataclass
class BufferedBody:
    """The body read so far, whether it is complete, and a non-body message that ended the reading."""

    data: bytes
    complete: bool
    received: bool
    trailing: Message | None

    def replay(self, receive: Receive) -> Receive:
        """A `receive` that yields this body (and the trailing message), then defers to `receive`."""
        pending: deque[Message] = deque()
        if self.received:
            pending.append({"type": "http.request", "body": self.data, "more_body": not self.complete})
        if self.trailing is not None:
            pending.append(self.trailing)

        async def replay() -> Message:
            if pending:
                return pending.popleft()
            return await receive()

        return replay


async def read_body(receive: Receive, limit: int | None = None) -> BufferedBody:
    """The request body, until it ends or another message (a disconnect) arrives.

    Raises:
        TooLargeError: more than `limit` bytes (nothing more is read).
    """
    data = bytearray()
    received = False
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return BufferedBody(bytes(data), complete=False, received=received, trailing=message)
        received = True
        data.extend(message.get("body", b""))
        if limit is not None and len(data) > limit:
            raise TooLargeError(f"request body exceeds {limit} bytes")
        if not message.get("more_body", False):
            return BufferedBody(bytes(data), complete=True, received=True, trailing=None)
