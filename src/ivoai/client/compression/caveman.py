"""CavemanCompressionProvider: preflight, private session runtime, managed proxy, health, teardown.

Seed 003, "Lifecycle e fallback": before Caveman is used ivoai re-validates the pinned binary
(SHA-256 of the whole file against the pin), runs `caveman-proxy version --json`, creates a private
session runtime, starts the proxy directly (no shell, its own process group, stdin closed) on an
ephemeral 127.0.0.1 port and waits, bounded, for `/health/ready`. `CAVEMAN_HOME` and
`CAVEMAN_CONFIG` point into `<session-runtime>/caveman/proxy-*` (0700 directories, 0600 config);
capture is disabled. A failure before the client starts falls back to Direct; after the client
started, the proxy's death ends that session (see `agents.process.Supervisor`).

The pinned asset (Caveman bin-v1.1.3, Linux amd64) cannot be fetched on the build machines, so the
tests run this lifecycle against a stand-in speaking the same `version --json` and `/health/ready`
contract. `IVOAI_TEST_CAVEMAN_SHA256` replaces the pin for such a stand-in: it is a test hook, it is
never written to config, and ivoai prints a warning on every launch that uses it.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ivoai.client.agents.executors import managed_bin_dir
from ivoai.client.compression._probe import run_probe
from ivoai.client.compression.errors import PreflightError
from ivoai.common import fsio
from ivoai.common.errors import TooLargeError
from ivoai.common.limits import (
    CAVEMAN_BINARY_MAX_BYTES,
    CAVEMAN_HEALTH_MAX_BYTES,
    CAVEMAN_HEALTH_POLL_SECONDS,
    CAVEMAN_HEALTH_TIMEOUT_SECONDS,
    CAVEMAN_VERSION_TIMEOUT_SECONDS,
)

BINARY = "caveman-proxy"
# Caveman v2.3.1 / runtime bundle bin-v1.1.3 (commit 0d2f052b…), proxy Linux amd64 (seed 003).
PINNED_SHA256 = "d883b9ab4b559e0c1935335c0e24400deb5c61d5e247f1ca239c4149f57885b0"
TEST_PIN_ENV = "IVOAI_TEST_CAVEMAN_SHA256"
HEALTH_SCHEMA = "caveman.proxy.health.v1"
SERVICE = "caveman-proxy"
CODEX_ROUTE = "/chatgpt"  # Codex keeps ownership of Authorization / ChatGPT-Account-ID
CODEX_PROVIDER_ID = "ivoai-caveman"
LICENSE_NOTE = (
    "caveman-proxy runtime: BSL-1.1 (Additional Use Grant: first-party self-hosted use); CLI/skills: MIT"
)


@dataclass(frozen=True)
class CavemanBinary:
    """A preflighted proxy binary."""

    path: str
    sha256: str
    version: str  # the pinned build reports "dev": the digest, not this string, is the authority
    schema: str
    test_pin: bool


@dataclass
class CavemanProxy:
    """A running session proxy."""

    pid: int
    port: int
    runtime: str  # <session-runtime>/caveman/proxy-<id>

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def expected_digest(env: Mapping[str, str]) -> tuple[str, bool]:
    """(the SHA-256 the binary must have, whether a test pin replaced the release pin)."""
    override = env.get(TEST_PIN_ENV, "").strip().lower()
    if override:
        return override, True
    return PINNED_SHA256, False


def file_sha256(path: str, max_bytes: int = CAVEMAN_BINARY_MAX_BYTES) -> str:
    """SHA-256 of a whole file, read without following a final symlink; bounded by `max_bytes`."""
    try:
        return fsio.file_sha256(path, max_bytes)
    except TooLargeError:
        raise PreflightError(
            f"{BINARY} is larger than {max_bytes} bytes", code="caveman_binary_too_large"
        ) from None


def preflight(env: Mapping[str, str]) -> CavemanBinary:
    """Check the managed binary (present, pinned digest, `version --json`).

    Raises:
        PreflightError: with a stable code (`caveman_not_installed`, `caveman_digest_mismatch`,
            `caveman_version_failed`); the launcher then runs Direct.
    """
    path = os.path.join(managed_bin_dir(env), BINARY)
    if not os.path.isfile(path) or os.path.islink(path) or not os.access(path, os.X_OK):
        raise PreflightError(
            f"{BINARY} is not installed in {managed_bin_dir(env)}", code="caveman_not_installed"
        )
    want, test_pin = expected_digest(env)
    got = file_sha256(path)
    if got != want:
        raise PreflightError(f"{BINARY} does not match its pinned SHA-256", code="caveman_digest_mismatch")
    probe = run_probe([path, "version", "--json"], timeout=CAVEMAN_VERSION_TIMEOUT_SECONDS, env=env)
    if not probe.ok:
        raise PreflightError(f"`{BINARY} version --json` failed", code="caveman_version_failed")
    try:
        doc = json.loads(probe.stdout)
    except json.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("version"), str) or "capabilities" not in doc:
        raise PreflightError(
            f"`{BINARY} version --json` did not return {{version, schema, capabilities}}",
            code="caveman_version_failed",
        )
    return CavemanBinary(path, got, doc["version"], str(doc.get("schema", "")), test_pin)


def free_loopback_port() -> int:
    """An ephemeral 127.0.0.1 port the kernel just handed out (the proxy binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def make_runtime(session_runtime: str) -> tuple[str, str]:
    """Create `<session-runtime>/caveman/proxy-<id>` (0700) and its 0600 config; return (home, config)."""
    base = os.path.join(session_runtime, "caveman")
    os.mkdir(base, 0o700)
    home = os.path.join(base, "proxy-" + os.urandom(8).hex())
    os.mkdir(home, 0o700)
    return home, os.path.join(home, "caveman.yaml")


def write_config(config_path: str, port: int) -> None:
    """The proxy's private config: loopback listener, capture off (seed 003: "Nenhuma captura")."""
    text = (
        "# Written by ivoai for one session; removed when the session ends.\n"
        "listen:\n"
        "  host: 127.0.0.1\n"
        f"  port: {port}\n"
        "capture:\n"
        "  enabled: false\n"
    )
    fd = os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def proxy_argv(binary: CavemanBinary, port: int) -> list[str]:
    """The proxy command line (no shell)."""
    return [binary.path, "serve", "--host", "127.0.0.1", "--port", str(port)]


def proxy_env(env: Mapping[str, str], home: str, config: str) -> dict[str, str]:
    """The proxy's environment: minimal, plus its private home and config (never a PAYG key)."""
    from ivoai.client.agents.childenv import probe_env

    out = probe_env(env)
    out["CAVEMAN_HOME"] = home
    out["CAVEMAN_CONFIG"] = config
    return out


def read_health(port: int, *, timeout: float = 1.0) -> dict[str, object] | None:
    """GET /health/ready once; the parsed document, or None when not (yet) answering."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/health/ready", headers={"Accept": "application/json"})
        resp = conn.getresponse()
        body = resp.read(CAVEMAN_HEALTH_MAX_BYTES + 1)
        if resp.status != 200 or len(body) > CAVEMAN_HEALTH_MAX_BYTES:
            return None
        doc = json.loads(body)
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()
    return doc if isinstance(doc, dict) else None


def is_ready(doc: Mapping[str, object] | None) -> bool:
    """The health contract: `{"ok": true, "service": "caveman-proxy", "schema": …}` (HEALTH_SCHEMA)."""
    return bool(doc) and doc is not None and doc.get("ok") is True and doc.get("service") == SERVICE


def wait_ready(port: int, pid: int, *, timeout: float = CAVEMAN_HEALTH_TIMEOUT_SECONDS) -> None:
    """Poll /health/ready until it answers ready, the proxy exits, or `timeout` passes.

    Raises:
        PreflightError: `caveman_exited` or `caveman_health_timeout`.
    """
    deadline = time.monotonic() + timeout
    delay = CAVEMAN_HEALTH_POLL_SECONDS
    while True:
        rpid, _ = os.waitpid(pid, os.WNOHANG)
        if rpid:
            raise PreflightError(f"{BINARY} exited before it was ready", code="caveman_exited")
        if is_ready(read_health(port, timeout=min(1.0, max(0.05, deadline - time.monotonic())))):
            return
        if time.monotonic() >= deadline:
            raise PreflightError(f"{BINARY} was not ready within {timeout:g}s", code="caveman_health_timeout")
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


def codex_config_args(proxy: CavemanProxy) -> list[str]:
    """Process-local Codex provider pointing at the proxy's /chatgpt route (Codex keeps its own auth)."""
    p = f"model_providers.{CODEX_PROVIDER_ID}"
    return [
        "-c",
        f'{p}.name="ivoai caveman"',
        "-c",
        f'{p}.base_url="{proxy.base_url}{CODEX_ROUTE}"',
        "-c",
        f'{p}.wire_api="responses"',
        "-c",
        f"{p}.requires_openai_auth=true",
        "-c",
        f'model_provider="{CODEX_PROVIDER_ID}"',
    ]


def claude_env(proxy: CavemanProxy) -> dict[str, str]:
    """Claude gets only its base URL (no synthetic token)."""
    return {"ANTHROPIC_BASE_URL": proxy.base_url}


def remove_runtime(session_runtime: str) -> None:
    """Remove `<session-runtime>/caveman` (never follows links: rmtree refuses symlinked roots)."""
    shutil.rmtree(os.path.join(session_runtime, "caveman"), ignore_errors=True)
