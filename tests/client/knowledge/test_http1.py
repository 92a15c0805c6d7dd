"""The router's lean HTTP/1.1 transport against a scripted loopback server (real sockets, real TLS).

The server below is a raw asyncio server, so each test states byte for byte what the peer sends:
framing (Content-Length, chunked with extensions and trailers, close-delimited), interim answers,
kept-alive and closed connections, malformed and oversized heads. Real MCP servers are covered by
test_upstream.py and test_router_servers.py, whose router sessions run on this transport.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import anyio
import httpx2
import pytest

from ivoai.client.knowledge.http1 import Http11Transport, connection_count
from ivoai.client.knowledge.upstream import OriginBoundTransport, UpstreamResponseTooLarge
from tests.scripted_http import MALFORMED_ANSWERS, MALFORMED_IDS, Scripted, json_reply, serving
from tests.tls import self_signed_cert

pytestmark = pytest.mark.timeout(60)


async def post(transport: Http11Transport, url: str, body: bytes = b'{"q":1}') -> httpx2.Response:
    request = httpx2.Request("POST", url + "/mcp", headers={"content-type": "application/json"}, content=body)
    response = await transport.handle_async_request(request)
    await response.aread()
    await response.aclose()
    return response


def test_a_request_goes_out_whole_and_the_connection_is_reused() -> None:
    peer = Scripted(json_reply())

    async def main() -> None:
        async with serving(peer) as url:
            transport = Http11Transport(url)
            first = await post(transport, url, b'{"n":1}')
            second = await post(transport, url, b'{"n":2}')
            await transport.aclose()
        assert first.status_code == second.status_code == 200
        assert first.content == b'{"ok":true}' and first.headers["content-type"] == "application/json"
        assert [r.body for r in peer.received] == [b'{"n":1}', b'{"n":2}']
        assert peer.received[0].head.startswith(b"POST /mcp HTTP/1.1\r\n")
        assert b"\r\nHost: 127.0.0.1:" in peer.received[0].head
        assert peer.connections == 1  # kept alive: both requests on one connection

    anyio.run(main)


def test_chunked_answers_with_extensions_and_trailers_are_decoded() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nx-trailer: yes\r\n\r\n"
    )
    peer = Scripted(lambda _: chunked)

    async def main() -> None:
        async with serving(peer) as url:
            transport = Http11Transport(url)
            first = await post(transport, url)
            second = await post(transport, url)
            await transport.aclose()
        assert first.content == second.content == b"hello, world"
        assert peer.connections == 1  # the chunked body was read to its end: reusable

    anyio.run(main)


def test_an_answer_delimited_by_closing_the_connection_is_read_and_the_connection_not_reused() -> None:
    peer = Scripted(lambda _: b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{}", True)

    async def main() -> None:
        async with serving(peer) as url:
            transport = Http11Transport(url)
            first = await post(transport, url)
            assert connection_count(transport) == 0
            second = await post(transport, url)
            await transport.aclose()
        assert first.content == second.content == b"{}"
        assert peer.connections == 2

    anyio.run(main)


def test_a_connection_the_server_closed_while_idle_is_replaced_before_the_next_request() -> None:
    peer = Scripted(json_reply(), close_after_reply=True)  # keep-alive advertised, then closed anyway

    async def main() -> None:
        async with serving(peer) as url:
            transport = Http11Transport(url)
            await post(transport, url)
            with anyio.fail_after(10):  # the server's FIN reaches the idle connection
                while connection_count(transport) and transport.idle[0].usable():
                    await anyio.sleep(0)
            second = await post(transport, url)
            await transport.aclose()
        assert second.status_code == 200 and peer.connections == 2

    anyio.run(main)


def test_an_answer_not_read_to_its_end_closes_its_connection() -> None:
    peer = Scripted(json_reply(b"x" * 100_000))

    async def main() -> None:
        async with serving(peer) as url:
            transport = Http11Transport(url)
            request = httpx2.Request("POST", url + "/mcp", content=b"{}")
            response = await transport.handle_async_request(request)
            async for _ in response.aiter_raw():
                break  # stop early: the rest of the body is still on the wire
            await response.aclose()
            assert connection_count(transport) == 0
            again = await post(transport, url)
            await transport.aclose()
        assert len(again.content) == 100_000 and peer.connections == 2

    anyio.run(main)


def test_interim_answers_are_skipped_and_bodyless_statuses_have_no_body() -> None:
    replies = iter(
        [
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
        ]
    )
    peer = Scripted(lambda _: next(replies))

    async def main() -> None:
        async with serving(peer) as url:
            transport = Http11Transport(url)
            statuses = [(r.status_code, r.content) for r in [await post(transport, url) for _ in range(3)]]
            await transport.aclose()
        assert statuses == [(200, b"ok"), (204, b""), (202, b"")]
        assert peer.connections == 1

    anyio.run(main)


@pytest.mark.parametrize(("reply", "message"), MALFORMED_ANSWERS, ids=MALFORMED_IDS)
def test_malformed_answers_are_protocol_errors_and_close_the_connection(reply: bytes, message: str) -> None:
    peer = Scripted(lambda _: reply, close_after_reply=True)

    async def main() -> None:
        async with serving(peer) as url:
            transport = Http11Transport(url)
            with pytest.raises(httpx2.RemoteProtocolError, match=message):
                await post(transport, url)
            assert connection_count(transport) == 0
            await transport.aclose()

    anyio.run(main)


def test_a_repeated_identical_content_length_is_one_length() -> None:
    peer = Scripted(json_reply(b'{"ok":true}', extra=b"content-length: 11\r\n"))

    async def main() -> None:
        async with serving(peer) as url:
            transport = Http11Transport(url)
            first = await post(transport, url)
            second = await post(transport, url)
            await transport.aclose()
        assert first.content == second.content == b'{"ok":true}'
        assert peer.connections == 1  # framed correctly, so the connection was reused

    anyio.run(main)


def test_a_truncated_body_is_a_protocol_error() -> None:
    peer = Scripted(lambda _: b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", close_after_reply=True)

    async def main() -> None:
        async with serving(peer) as url:
            transport = Http11Transport(url)
            with pytest.raises(httpx2.RemoteProtocolError, match="before the end"):
                await post(transport, url)
            await transport.aclose()

    anyio.run(main)


def test_requests_for_another_origin_and_header_line_breaks_are_refused_before_sending() -> None:
    peer = Scripted(json_reply())

    async def main() -> None:
        async with serving(peer) as url:
            transport = Http11Transport(url)
            other = httpx2.Request("POST", f"http://127.0.0.1:{peer.port + 1}/mcp", content=b"{}")
            with pytest.raises(httpx2.LocalProtocolError, match="one origin"):
                await transport.handle_async_request(other)
            injected = httpx2.Request(
                "POST", url + "/mcp", headers={"x-evil": "a\r\nHost: else"}, content=b"{}"
            )
            with pytest.raises(httpx2.LocalProtocolError, match="line break"):
                await transport.handle_async_request(injected)
            await transport.aclose()
        assert peer.received == [] and peer.connections == 0

    anyio.run(main)


def test_a_refused_connection_is_a_connect_error() -> None:
    async def main() -> None:
        peer = Scripted(json_reply())
        async with serving(peer) as url:
            pass  # closed again: nothing listens on the port now
        transport = Http11Transport(url)
        with pytest.raises(httpx2.ConnectError):
            await post(transport, url)

    anyio.run(main)


def test_tls_verifies_the_certificate_and_nothing_is_sent_to_an_untrusted_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed_cert(tmp_path)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    peer = Scripted(json_reply())

    async def main() -> None:
        async with serving(peer, server_tls) as url:
            untrusted = Http11Transport(url)
            with pytest.raises(httpx2.ConnectError):
                await post(untrusted, url)
            assert peer.received == []
            monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the operator's CA, honoured with trust_env
            trusted = Http11Transport(url, trust_env=True)
            responses = [await post(trusted, url) for _ in range(2)]
            await trusted.aclose()
        assert [r.status_code for r in responses] == [200, 200]
        assert len(peer.received) == 2 and peer.received[0].connection == peer.received[1].connection

    anyio.run(main)


def test_behind_the_origin_bound_transport_an_answer_over_the_cap_fails_and_closes_its_connection() -> None:
    chunk = b"x" * 1000
    body = b"".join(b"%x\r\n" % len(chunk) + chunk + b"\r\n" for _ in range(5)) + b"0\r\n\r\n"
    peer = Scripted(lambda _: b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + body)

    async def main() -> None:
        async with serving(peer) as url:
            inner = Http11Transport(url)
            transport = OriginBoundTransport(url, "cred", max_response_bytes=2500, inner=inner)
            request = httpx2.Request("POST", url + "/mcp", content=b"{}")
            response = await transport.handle_async_request(request)
            with pytest.raises(UpstreamResponseTooLarge):
                await response.aread()
            await response.aclose()
            assert connection_count(inner) == 0
            await transport.aclose()
        assert b"\r\nAuthorization: Bearer cred" in peer.received[0].head

    anyio.run(main)
