"""A scripted model endpoint on loopback, standing in for the vendors' model services only.

No subscription login exists on these machines, so the real `claude -p` and `codex exec` are pointed
at this server (AUTO.md, "Testing with the real CLIs, offline"): every turn answers one short text.
It serves the Anthropic Messages API (`POST /v1/messages`, SSE when `stream` is set) and the OpenAI
Responses API (`POST /v1/responses`, SSE). Test infrastructure only; ivoai itself never sets a base URL
or a key for the clients.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "hello from the stub model"


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200, b'{"data": [], "models": []}', "application/json")

    def do_HEAD(self) -> None:
        self._send(200, b"", "application/json")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.startswith("/v1/responses"):
            self._send(200, _responses(), "text/event-stream")
        elif self.path.startswith("/v1/messages"):
            model = str(body.get("model", "stub"))
            if body.get("stream"):
                self._send(200, _messages_stream(model), "text/event-stream")
            else:
                self._send(200, json.dumps(_message(model)).encode(), "application/json")
        else:
            self._send(404, b'{"error": "not found"}', "application/json")


def _message(model: str) -> dict[str, Any]:
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": ANSWER}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 5},
    }


def _messages_stream(model: str) -> bytes:
    start = dict(_message(model), content=[], stop_reason=None)
    return _sse(
        [
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ANSWER}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def _responses() -> bytes:
    usage = {
        "input_tokens": 5,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 10,
    }
    item = {
        "type": "message",
        "role": "assistant",
        "id": "m1",
        "content": [{"type": "output_text", "text": ANSWER}],
    }
    return _sse(
        [
            ("response.created", {"type": "response.created", "response": {"id": "resp_stub"}}),
            ("response.output_item.done", {"type": "response.output_item.done", "item": item}),
            (
                "response.completed",
                {"type": "response.completed", "response": {"id": "resp_stub", "usage": usage}},
            ),
        ]
    )


@contextmanager
def model_stub() -> Iterator[str]:
    """Serve the stub in a thread; yields its base URL (`http://127.0.0.1:PORT`)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
