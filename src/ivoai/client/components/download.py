"""Bounded, verified downloads of pinned artifacts.

HTTPS only (plain HTTP to 127.0.0.1 only for a test manifest), redirects only to HTTPS (or back to
the same loopback origin), at most `max_bytes` (a larger Content-Length is refused before reading),
an idle timeout per read and an overall deadline. The body streams into a private staging file while
it is hashed; a digest other than the pinned one deletes the file and raises. Verified downloads
are kept in `$XDG_CACHE_HOME/ivoai/downloads/<sha256>` so a repair or an offline setup reuses them
(re-verified on every use).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from ivoai.client.components.errors import DownloadError, IntegrityError
from ivoai.common import fsio
from ivoai.common.errors import TooLargeError
from ivoai.common.fsio import PRIVATE_FILE_MODE
from ivoai.common.limits import COMPONENT_DOWNLOAD_STALL_SECONDS, COMPONENT_DOWNLOAD_TIMEOUT_SECONDS
from ivoai.common.redact import redact

CHUNK = 1 << 16
MAX_REDIRECTS = 5


def _origin_ok(url: str, first: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        return True
    start = urllib.parse.urlsplit(first)
    return parts.scheme == "http" and parts.hostname == "127.0.0.1" and parts.netloc == start.netloc


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow at most MAX_REDIRECTS redirects, never from HTTPS down to HTTP."""

    def __init__(self, first: str) -> None:
        self.first = first
        self.count = 0

    def redirect_request(
        self, req: urllib.request.Request, fp: object, code: int, msg: str, headers: object, newurl: str
    ) -> urllib.request.Request | None:
        self.count += 1
        if self.count > MAX_REDIRECTS:
            raise DownloadError(f"too many redirects (more than {MAX_REDIRECTS})")
        if not _origin_ok(newurl, self.first):
            raise DownloadError("refused a redirect to a non-HTTPS location")
        return super().redirect_request(req, fp, code, msg, headers, newurl)  # type: ignore[arg-type]


def file_sha256(path: Path, limit: int | None = None) -> str:
    """SHA-256 of a file read without following a final symlink (optionally bounded)."""
    try:
        return fsio.file_sha256(path, limit)
    except TooLargeError:
        raise IntegrityError(f"{path} is larger than {limit} bytes") from None


def download(
    url: str,
    dest: Path,
    *,
    sha256: str,
    max_bytes: int,
    timeout: float = COMPONENT_DOWNLOAD_TIMEOUT_SECONDS,
    stall: float = COMPONENT_DOWNLOAD_STALL_SECONDS,
) -> None:
    """Fetch `url` into the new file `dest` (0600), verifying size and SHA-256 as it streams.

    Raises:
        DownloadError: HTTP error, redirect refused, stall, deadline or size limit (nothing left behind).
        IntegrityError: the body's SHA-256 differs from `sha256` (the file is deleted).
    """
    if not _origin_ok(url, url):
        raise DownloadError("only HTTPS downloads are allowed")
    shown = redact(urllib.parse.urlsplit(url)._replace(query="", fragment="").geturl())
    opener = urllib.request.build_opener(_Redirects(url))
    deadline = time.monotonic() + timeout
    tmp = dest.with_name(f".{dest.name}.part-{secrets.token_hex(6)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    ok = False
    try:
        request = urllib.request.Request(
            url, headers={"User-Agent": "ivoai-components", "Accept-Encoding": "identity"}
        )
        try:
            response = opener.open(request, timeout=stall)
        except urllib.error.HTTPError as exc:
            raise DownloadError(f"{shown}: HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, socket.timeout | TimeoutError):
                raise DownloadError(
                    f"{shown}: no answer within {stall:g} s", code="download_timeout"
                ) from None
            raise DownloadError(f"{shown}: {redact(str(reason))}") from None
        with response:
            length = response.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) > max_bytes:
                raise DownloadError(
                    f"{shown}: {int(length)} bytes exceeds the limit of {max_bytes} bytes",
                    code="download_too_large",
                )
            digest = hashlib.sha256()
            total = 0
            while True:
                if time.monotonic() > deadline:
                    raise DownloadError(
                        f"{shown}: not finished within {timeout:g} s", code="download_timeout"
                    )
                try:
                    block = response.read(CHUNK)
                except TimeoutError:
                    raise DownloadError(
                        f"{shown}: stalled (no data for {stall:g} s)", code="download_timeout"
                    ) from None
                except OSError as exc:
                    raise DownloadError(f"{shown}: {redact(str(exc))}") from None
                if not block:
                    break
                total += len(block)
                if total > max_bytes:
                    raise DownloadError(
                        f"{shown}: more than the limit of {max_bytes} bytes", code="download_too_large"
                    )
                digest.update(block)
                view = memoryview(block)
                while view:
                    view = view[os.write(fd, view) :]
        if digest.hexdigest() != sha256:
            raise IntegrityError(
                f"{shown}: SHA-256 {digest.hexdigest()} does not match the pinned {sha256}; refused"
            )
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, dest)
        ok = True
    finally:
        if fd >= 0:
            os.close(fd)
        if not ok:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
