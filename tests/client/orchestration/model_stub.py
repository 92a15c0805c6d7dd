"""A scripted model service on loopback, standing in for the vendors' model APIs only.

The real `codex exec` and `claude -p` binaries run end to end against it (AUTO.md, "Testing with
the real CLIs, offline"): Codex is pointed at it with a process-local `model_providers.stub`
(Responses API, `POST /v1/responses`, SSE), Claude with `ANTHROPIC_BASE_URL` and a dummy
`ANTHROPIC_AUTH_TOKEN` (Messages API, `POST /v1/messages`, SSE). Only the tests set those; ivoai
itself never sets a model endpoint or a key for a client. Each request pops the next scripted
reply (`answer`, `usage_limit`, `error500`, `hang`); the default is `answer` with `default_text`.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

STUB_KEY_ENV = "IVOAI_TEST_STUB_KEY"


@dataclass
class Reply:
    """One scripted reply."""

    kind: str = "answer"  # answer | tool_use | usage_limit | error500 | hang
    text: str = ""  # the answer, or (tool_use) the tool's name
    tool_input: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModelStub:
    """The running stub: its port, the scripted replies and what it received."""

    port: int = 0
    default_text: str = '{"summary": "stub answer", "findings": [], "state_delta": {}}'
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def next_reply(self) -> Reply:
        return self.replies.pop(0) if self.replies else Reply("answer", self.default_text)

    def codex_args(self) -> tuple[str, ...]:
        """`-c` overrides that make the real `codex exec` use this stub as its model provider."""
        base = f"http://127.0.0.1:{self.port}/v1"
        return (
            "-c",
            "model_provider=stub",
            "-c",
            'model_providers.stub.name="stub"',
            "-c",
            f'model_providers.stub.base_url="{base}"',
            "-c",
            f'model_providers.stub.env_key="{STUB_KEY_ENV}"',
            "-c",
            'model_providers.stub.wire_api="responses"',
            "-c",
            "model_providers.stub.request_max_retries=0",
            "-c",
            "model_providers.stub.stream_max_retries=0",
        )

    def codex_env(self) -> dict[str, str]:
        return {STUB_KEY_ENV: "stub"}

    def claude_env(self) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{self.port}", "ANTHROPIC_AUTH_TOKEN": "stub"}


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def _responses(text: str) -> bytes:
    return _sse(
        [
            ("response.created", {"type": "response.created", "response": {"id": "resp_stub"}}),
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "item": {
                        "type": "message",
                        "role": "assistant",
                        "id": "msg_stub",
                        "content": [{"type": "output_text", "text": text}],
                    },
                },
            ),
            (
                "response.completed",
                {
                    "type": "response.completed",
                    "response": {
                        "id": "resp_stub",
                        "usage": {
                            "input_tokens": 120,
                            "input_tokens_details": {"cached_tokens": 20},
                            "output_tokens": 30,
                            "output_tokens_details": {"reasoning_tokens": 0},
                            "total_tokens": 150,
                        },
                    },
                },
            ),
        ]
    )


def _messages(model: str, text: str) -> bytes:
    return _sse(
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_stub",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 40, "output_tokens": 1},
                    },
                },
            ),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 12},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def _tool_use(model: str, name: str, tool_input: dict[str, Any]) -> bytes:
    return _sse(
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_tool",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 40, "output_tokens": 1},
                    },
                },
            ),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "tool_use", "id": "toolu_stub", "name": name, "input": {}},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(tool_input)},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": 12},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def _handler(stub: ModelStub) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_HEAD(self) -> None:
            self._send(200, b"", "text/plain")

        def do_GET(self) -> None:
            self._send(404, b"{}", "application/json")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", 0) or 0))
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                body = {}
            stub.requests.append({"path": self.path, "body": body})
            reply = stub.next_reply()
            if reply.kind == "hang":
                stub.release.wait(120)
                return
            if reply.kind == "error500":
                self._send(500, b'{"error": {"message": "stub failure"}}', "application/json")
            elif reply.kind == "usage_limit":
                err = {
                    "error": {
                        "type": "usage_limit_reached",
                        "message": "The usage limit has been reached",
                        "plan_type": "plus",
                        "resets_at": 4102444800,
                    }
                }
                self._send(429, json.dumps(err).encode(), "application/json")
            elif reply.kind == "tool_use":
                self._send(
                    200,
                    _tool_use(str(body.get("model", "stub")), reply.text, reply.tool_input),
                    "text/event-stream",
                )
            elif self.path.startswith("/v1/responses"):
                self._send(200, _responses(reply.text), "text/event-stream")
            else:
                self._send(200, _messages(str(body.get("model", "stub")), reply.text), "text/event-stream")

    return Handler


@contextmanager
def model_stub(**kwargs: Any) -> Iterator[ModelStub]:
    """Serve a ModelStub on 127.0.0.1 (ephemeral port) for the block."""
    stub = ModelStub(**kwargs)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    server.daemon_threads = True
    stub.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        stub.release.set()
        server.shutdown()
        server.server_close()
        thread.join(10)
