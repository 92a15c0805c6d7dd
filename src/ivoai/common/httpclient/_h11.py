"""HTTP/1.1 framing for ivoai's lean client transports: h11 parses, this module adds the policy.

h11 (the parser uvicorn and httpcore use) writes each request and frames each answer: status line,
header lines, Content-Length (conflicting values refused), chunked transfer coding (the only one it
accepts), answers delimited by the end of the connection, interim 1xx answers, bodyless answers to
HEAD and 204/304, keep-alive (`Connection: close` and HTTP/1.0 end it). On top of that:

- an answer with both Content-Length and Transfer-Encoding is refused, never framed by one of them
  (RFC 9112 §6.1: a sign of response smuggling; h11 would frame it by the transfer coding);
- an answer head over `head_max_bytes` is refused (complete or not);
- a connection carries the next request only when h11 has both sides DONE and nothing arrived after
  the end of the answer (bytes a server sent beyond its answer are never read as the next one);
- h11's errors become httpx2's (`RemoteProtocolError`, `LocalProtocolError`), the exceptions every
  httpx2 caller already handles, with messages that name the problem but never quote bytes from the
  wire (h11's own messages do) or a request header value (which may be a credential).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Final

import h11
import httpx2

NEED_DATA: Final = h11.NEED_DATA
END_OF_ANSWER: Final = h11.EndOfMessage

# h11's message (a fragment of it) -> what the transport says instead; the first match wins.
_H11_MESSAGES: tuple[tuple[str, str], ...] = (
    ("conflicting Content-Length", "conflicting Content-Length values"),
    ("Content-Length", "malformed Content-Length"),
    ("Transfer-Encoding", "unsupported transfer coding"),
    ("_SWITCH_", "unexpected protocol switch"),
    ("chunk header", "malformed chunk size"),
    ("chunk footer", "malformed chunk end"),
    ("incomplete chunked read", "server closed the connection before the end of the answer"),
    ("complete message body", "server closed the connection before the end of the answer"),
    ("status line", "malformed status line"),
    ("response line", "malformed status line"),
    ("request line", "malformed status line"),
    ("header", "malformed header line"),
    ("continuation line", "malformed header line"),
    ("unexpectedly closed", "server closed the connection in the middle of the answer head"),
    ("ConnectionClosed", "server closed the connection without sending a final answer"),
)


def framing_problem(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """Why a message head's framing is refused, or None (header names in any case)."""
    names = {name.lower() for name, _ in headers}
    if b"content-length" in names and b"transfer-encoding" in names:
        return "both Content-Length and Transfer-Encoding: ambiguous framing"
    return None


def request_event(request: httpx2.Request) -> h11.Request:
    """The request head as h11 will write it; header names and values are checked here, before any
    connection is opened.

    Raises:
        httpx2.LocalProtocolError: a header name or value HTTP/1.1 does not allow (a line break, a
            control character); the message does not show it.
    """
    try:
        return h11.Request(
            method=request.method, target=request.url.raw_path or b"/", headers=request.headers.raw
        )
    except h11.LocalProtocolError:
        raise httpx2.LocalProtocolError(
            "a request header contains a line break or another character HTTP/1.1 does not allow",
            request=request,
        ) from None


class ClientParser:
    """h11's client side of one connection, with the policy of the module doc (no I/O here)."""

    def __init__(self, head_max_bytes: int) -> None:
        self.head_max_bytes = head_max_bytes
        self._h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=head_max_bytes)
        self.received = 0  # bytes of the current answer fed so far
        self.reusable = False  # the answer was read to its end and the connection is ready for the next

    def request_bytes(self, head: h11.Request, request: httpx2.Request) -> bytes:
        """The whole request (head and body) to write in one send.

        Raises:
            httpx2.LocalProtocolError: h11 cannot write it (e.g. a body longer than its Content-Length).
        """
        self.reusable = False
        try:
            data = self._h11.send(head)
            content = request.content  # lean transports send bodies built from bytes, never streamed
            if content:
                data += self._h11.send(h11.Data(data=content))
            return data + self._h11.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:
            raise httpx2.LocalProtocolError(f"cannot send the request: {exc}", request=request) from None

    def feed(self, data: bytes) -> None:
        """Bytes read from the connection; `b""` when the server closed it."""
        self.received += len(data)
        self._h11.receive_data(data)

    def _next(self, request: httpx2.Request) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        try:
            return self._h11.next_event()
        except h11.RemoteProtocolError as exc:
            raise httpx2.RemoteProtocolError(self._describe(str(exc)), request=request) from None

    def _describe(self, h11_message: str) -> str:
        if self.received == 0:
            return "server disconnected without sending a response"
        if "Receive buffer too long" in h11_message:
            return f"response head over {self.head_max_bytes} bytes"
        for fragment, message in _H11_MESSAGES:
            if fragment in h11_message:
                return message
        return "malformed answer"

    def next_head(self, request: httpx2.Request) -> h11.Response | None:
        """The answer's head once complete (interim 1xx answers skipped), or None: feed more data.

        Raises:
            httpx2.RemoteProtocolError: malformed, oversized or ambiguously framed head, or no answer.
        """
        while True:
            event = self._next(request)
            if event is h11.NEED_DATA:
                return None
            if isinstance(event, h11.Response):
                if self.received > self.head_max_bytes:  # cheap test first: the head alone may fit
                    head_size = self.received - len(self._h11.trailing_data[0])
                    if head_size > self.head_max_bytes:
                        raise httpx2.RemoteProtocolError(
                            f"response head over {self.head_max_bytes} bytes", request=request
                        )
                problem = framing_problem(event.headers.raw_items())
                if problem is not None:
                    raise httpx2.RemoteProtocolError(f"an answer with {problem}", request=request)
                return event
            if not isinstance(event, h11.InformationalResponse):  # pragma: no cover - h11 raises first
                raise httpx2.RemoteProtocolError("malformed answer", request=request)

    def next_body(self, request: httpx2.Request) -> bytes | type[h11.NEED_DATA] | type[h11.EndOfMessage]:
        """The next piece of the body, NEED_DATA (feed more), or END_OF_ANSWER (then `reusable` says
        whether the connection may carry the next request).

        Raises:
            httpx2.RemoteProtocolError: malformed body framing, or the connection ended too early.
        """
        while True:
            event = self._next(request)
            if event is h11.NEED_DATA:
                return h11.NEED_DATA
            if isinstance(event, h11.Data):
                if event.data:
                    return bytes(event.data)
                continue
            if isinstance(event, h11.EndOfMessage):
                self.reusable = self._finish()
                return h11.EndOfMessage
            raise httpx2.RemoteProtocolError("malformed answer", request=request)  # pragma: no cover

    def settle(self, request: httpx2.Request) -> bool:
        """When the caller is done with the answer: whether the connection may carry the next request.

        True after an answer read to its end, or one whose end is already buffered (an empty body);
        False for a body left unread, a failed or interrupted exchange, or the module doc's rules.
        """
        if not self.reusable:
            with contextlib.suppress(httpx2.RemoteProtocolError):
                self.next_body(request)  # reaches END_OF_ANSWER only if nothing of the body is left
        return self.reusable

    def _finish(self) -> bool:
        conn = self._h11
        if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
            return False
        pending, closed = conn.trailing_data
        if pending or closed:
            return False
        conn.start_next_cycle()
        self.received = 0
        return True
