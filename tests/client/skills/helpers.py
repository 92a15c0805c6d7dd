"""Helpers for skill tests: write skill directories, hash trees, build git repositories and archives."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def write_skill(
    root: Path, name: str, extra: str = "", *, body: str = "# Body\n", directory: str | None = None
) -> Path:
    """`root/<directory or name>/SKILL.md` with a valid front matter plus `extra` lines."""
    path = root / (directory if directory is not None else name)
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text(f"---\nname: {name}\ndescription: The {name} skill\n{extra}---\n{body}")
    return path


def files_digest(path: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every regular file below `path` (an independent view of a tree)."""
    out = {}
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            full = Path(dirpath) / name
            out[str(full.relative_to(path))] = hashlib.sha256(full.read_bytes()).hexdigest()
    return out


def git(repo: Path, *args: str) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(repo.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "--initial-branch=main")
    return path


def commit_all(repo: Path, message: str = "change") -> str:
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def tar_bytes(members: list[tuple[str, bytes | None, int, bytes]]) -> bytes:
    """A .tar.gz: (name, data or None for a dir, mode, type) per member; type is a tarfile type."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data, mode, kind in members:
            info = tarfile.TarInfo(name)
            info.mode = mode
            info.type = kind
            if kind == tarfile.SYMTYPE or kind == tarfile.LNKTYPE:
                info.linkname = "/etc/passwd"
            if data is not None:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                tf.addfile(info)
    return buf.getvalue()


def zip_bytes(members: list[tuple[str, bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return buf.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextmanager
def serve(routes: dict[str, tuple[int, dict[str, str], bytes]]) -> Iterator[str]:
    """A loopback HTTP/1.0 server answering GET PATH with (status, headers, body); yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, headers, body = routes.get(self.path, (404, {}, b"not found"))
            self.send_response(status)
            for key, value in headers.items():
                if value != "omit":  # Content-Length "omit": a close-delimited body of unknown size
                    self.send_header(key, value)
            if "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def model_stub() -> Iterator[tuple[str, list[bytes]]]:
    """Stands in for the vendors' model APIs on loopback (no account can be had here).

    Records every POST body (what the real `claude -p` / `codex exec` send to the model) and
    answers 400 with an Anthropic-style error, so each client fails its turn at once, without retries.
    """
    bodies: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            bodies.append(self.rfile.read(length))
            body = b'{"type": "error", "error": {"type": "invalid_request_error", "message": "stub"}}'
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
