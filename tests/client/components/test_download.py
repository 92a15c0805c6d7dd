"""Verified downloads from a loopback server: digest, size cap, stall timeout, redirects."""

from __future__ import annotations

from pathlib import Path

import pytest

from ivoai.client.components.download import download
from ivoai.client.components.errors import DownloadError, IntegrityError
from tests.client.components.helpers import ArtifactServer, serve, sha256

PAYLOAD = b"pinned artifact bytes\n" * 100


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_a_matching_download_lands_privately(tmp_path: Path) -> None:
    with serve(ArtifactServer({"a.bin": PAYLOAD})) as srv:
        download(srv.url("a.bin"), tmp_path / "a", sha256=sha256(PAYLOAD), max_bytes=len(PAYLOAD))
    assert (tmp_path / "a").read_bytes() == PAYLOAD
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o600


def test_a_tampered_body_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    with (
        serve(ArtifactServer({"a.bin": PAYLOAD[:-1] + b"X"})) as srv,
        pytest.raises(IntegrityError, match="does not match the pinned"),
    ):
        download(srv.url("a.bin"), tmp_path / "a", sha256=sha256(PAYLOAD), max_bytes=10**6)
    assert _leftovers(tmp_path) == []


def test_a_body_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    with serve(ArtifactServer({"a.bin": PAYLOAD})) as srv, pytest.raises(DownloadError) as err:
        download(srv.url("a.bin"), tmp_path / "a", sha256=sha256(PAYLOAD), max_bytes=100)
    assert err.value.code == "download_too_large"
    assert "exceeds the limit of 100 bytes" in err.value.message
    assert _leftovers(tmp_path) == []


def test_a_stalled_download_times_out(tmp_path: Path) -> None:
    server = ArtifactServer({"slow.bin": PAYLOAD}, stall={"slow.bin"})
    with serve(server) as srv, pytest.raises(DownloadError, match=r"stalled \(no data for 0.5 s\)") as err:
        download(srv.url("slow.bin"), tmp_path / "a", sha256=sha256(PAYLOAD), max_bytes=10**6, stall=0.5)
    assert err.value.code == "download_timeout"
    assert _leftovers(tmp_path) == []


def test_redirects_to_plain_http_elsewhere_are_refused(tmp_path: Path) -> None:
    server = ArtifactServer({"a.bin": PAYLOAD}, redirects={"moved": "http://example.invalid/a.bin"})
    with serve(server) as srv, pytest.raises(DownloadError, match="non-HTTPS"):
        download(srv.url("moved"), tmp_path / "a", sha256=sha256(PAYLOAD), max_bytes=10**6)


def test_a_same_origin_loopback_redirect_is_followed(tmp_path: Path) -> None:
    server = ArtifactServer({"a.bin": PAYLOAD})
    with serve(server) as srv:
        srv.redirects["moved"] = srv.url("a.bin")
        download(srv.url("moved"), tmp_path / "a", sha256=sha256(PAYLOAD), max_bytes=10**6)
    assert server.hits == ["moved", "a.bin"]


def test_plain_http_to_anything_but_loopback_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="only HTTPS"):
        download("http://example.invalid/x", tmp_path / "a", sha256="0" * 64, max_bytes=1)
