"""Test helpers for components: a loopback artifact server, archive builders, test manifests.

The real Caveman asset cannot be fetched on these machines, so artifact tests serve locally built
archives from a loopback HTTP server through a test manifest (`IVOAI_TEST_COMPONENTS_MANIFEST` or
`load_manifest(path)`); everything else about the install (download limits, verification,
extraction, launchers, journal) is the real code.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ivoai.client.components.installers import InstallContext
from ivoai.common.paths import XdgPaths

HERE = Path(__file__).resolve().parent
CAVEMAN_SCRIPT = HERE.parent / "compression" / "caveman_standin.py"


def tool_script(version: str, *, fail: bool = False) -> bytes:
    """A stand-in command-line tool answering `--version` with `standin-tool VERSION`."""
    body = "import sys\n"
    if fail:
        body += "sys.exit(7)\n"
    body += (
        f"if sys.argv[1:] == ['--version']:\n    print('standin-tool {version}')\n    sys.exit(0)\n"
        "print('ran', sys.argv[1:])\n"
    )
    return f"#!{sys.executable}\n{body}".encode()


def caveman_script() -> bytes:
    return f"#!{sys.executable}\n".encode() + CAVEMAN_SCRIPT.read_bytes()


def tar_gz(members: dict[str, bytes], *, mode: int = 0o755) -> bytes:
    """A tar.gz of regular files (parents implied)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16
            zf.writestr(info, data)
    return buf.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class ArtifactServer:
    """A loopback HTTP server: `files[path] = bytes`; `stall` paths send headers and then nothing."""

    files: dict[str, bytes] = field(default_factory=dict)
    stall: set[str] = field(default_factory=set)
    redirects: dict[str, str] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)
    port: int = 0
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"


@contextmanager
def serve(server: ArtifactServer) -> Iterator[ArtifactServer]:
    """Run `server` on an ephemeral loopback port for the block."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            path = self.path.lstrip("/")
            server.hits.append(path)
            if path in server.redirects:
                self.send_response(302)
                self.send_header("Location", server.redirects[path])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = server.files.get(path)
            if data is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if path in server.stall:
                self.wfile.write(data[:10])
                self.wfile.flush()
                server.release.wait(30)
                return
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def artifact_component(
    name: str,
    version: str,
    url: str,
    archive: bytes,
    files: dict[str, bytes],
    *,
    fmt: str = "tar.gz",
    launcher: str | None = None,
    probe: str = "args = [\"--version\"], pattern = 'standin-tool (\\S+)'",
    default: bool = True,
) -> str:
    """One `[components.NAME]` table for a test manifest."""
    launcher_file = launcher or next(iter(files))
    file_lines = ", ".join(f'"{rel}" = "{sha256(data)}"' for rel, data in files.items())
    return (
        f"[components.{name}]\n"
        f'display = "{name} (test)"\nkind = "artifact"\nversion = "{version}"\nlicense = "test"\n'
        f'default = {"true" if default else "false"}\nprovenance = "loopback test server"\n'
        f"probe = {{ {probe} }}\n"
        f'launchers."{name}" = {{ copy = "{launcher_file}" }}\n'
        f'required = ["{launcher_file}"]\n'
        f"[components.{name}.assets.linux-x64]\n"
        f'url = "{url}"\nsha256 = "{sha256(archive)}"\nformat = "{fmt}"\nmax_bytes = 10485760\n'
        f"files = {{ {file_lines} }}\n"
    )


def write_manifest(directory: Path, *tables: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "manifest.toml"
    path.write_text("schema = 1\n\n" + "\n".join(tables), encoding="utf-8")
    return path


def context(xdg: XdgPaths, **kwargs: object) -> InstallContext:
    return InstallContext(xdg, dict(os.environ), **kwargs)  # type: ignore[arg-type]


def tree_bytes(*roots: Path) -> dict[str, bytes | str]:
    """Every file below `roots` with its bytes (symlinks as their target): for byte-exact comparisons."""
    out: dict[str, bytes | str] = {}
    for root in roots:
        if not root.exists():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if path.name.endswith(".lock") and path.stat().st_size == 0:
                    continue  # flock files: created by readers too
                out[str(path)] = os.readlink(path) if path.is_symlink() else path.read_bytes()
    return out
