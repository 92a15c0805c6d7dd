"""Request framing on the real listener (uvicorn's h11 protocol as the gateway configures it), driven
with raw sockets: ambiguous framing is refused and the connection closed; every answer, the server's
own included, carries `X-Content-Type-Options: nosniff`."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.runtime.runner import RunningServer, running
from tests.server.gateway.support import data_dir, make_hub


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    data = data_dir(tmp_path_factory.mktemp("framing"))
    with running(data, GatewaySettings(listen_port=0), hub=make_hub(data)) as srv:
        yield srv


def connect(srv: RunningServer) -> socket.socket:
    port = int(srv.url.rsplit(":", 1)[1])
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def read_response(sock: socket.socket, buffered: bytes = b"") -> tuple[bytes, bytes]:
    """One whole response (head and Content-Length body) and what was read beyond it."""
    data = buffered
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed mid-response: {data!r}"
        data += chunk
    head_end = data.index(b"\r\n\r\n") + 4
    length = 0
    for line in data[:head_end].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(data) < head_end + length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed mid-body"
        data += chunk
    return data[: head_end + length], data[head_end + length :]


def read_to_close(sock: socket.socket) -> bytes:
    """Everything until the server closes the connection (bounded by the socket timeout)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def head(srv: RunningServer, request_line: bytes, *headers: bytes) -> bytes:
    host = srv.url.removeprefix("http://").encode()
    return b"\r\n".join([request_line, b"Host: " + host, *headers]) + b"\r\n\r\n"


@pytest.mark.parametrize(
    "framing",
    [
        (b"Content-Length: 5", b"Transfer-Encoding: chunked"),
        (b"Transfer-Encoding: chunked", b"Content-Length: 0"),
    ],
    ids=["cl-then-te", "te-then-cl"],
)
def test_content_length_with_transfer_encoding_is_refused_and_the_connection_closed(
    server: RunningServer, framing: tuple[bytes, bytes]
) -> None:
    # The chunked body ends at once; by Content-Length the next request would be part of the body.
    smuggled = head(server, b"GET /health HTTP/1.1")
    raw = head(server, b"POST /register HTTP/1.1", *framing) + b"0\r\n\r\n" + smuggled
    with connect(server) as sock:
        sock.sendall(raw)
        received = read_to_close(sock)  # the server closes: the read ends at its EOF
    assert received.startswith(b"HTTP/1.1 400 ")
    assert received.count(b"HTTP/1.1 ") == 1  # the request behind it was never answered
    assert b"x-content-type-options: nosniff" in received.lower()


def test_a_well_framed_request_keeps_the_connection_open(server: RunningServer) -> None:
    with connect(server) as sock:
        sock.sendall(head(server, b"GET /health HTTP/1.1"))
        first, rest = read_response(sock)
        sock.sendall(head(server, b"GET /health HTTP/1.1"))
        second, _ = read_response(sock, rest)
    assert first.startswith(b"HTTP/1.1 200 ") and second.startswith(b"HTTP/1.1 200 ")


def test_the_servers_own_error_answers_carry_nosniff(server: RunningServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GARBAGE\r\n\r\n")
        received = read_to_close(sock)
    assert received.startswith(b"HTTP/1.1 400 ")
    assert b"x-content-type-options: nosniff" in received.lower()


def test_guard_refusals_carry_nosniff_and_no_store(server: RunningServer) -> None:
    requests = {
        b"421": b"GET /health HTTP/1.1\r\nHost: evil.example\r\n\r\n",
        b"403": head(server, b"GET /health HTTP/1.1", b"Origin: https://evil.example"),
    }
    for status, raw in requests.items():
        with connect(server) as sock:
            sock.sendall(raw)
            answer, _ = read_response(sock)
        assert answer.startswith(b"HTTP/1.1 " + status), answer
        lowered = answer.lower()
        assert lowered.count(b"x-content-type-options: nosniff") == 1
        assert b"cache-control: no-store" in lowered
