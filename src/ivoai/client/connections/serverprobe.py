"""`ivoai doctor`'s view of every enrolled server: probed in parallel, bounded, cached, secret-free.

Per server (enabled or not), within DOCTOR_SERVER_PROBE_DEADLINE_SECONDS for all of them together:

- `reachable`: the discovery document (`/.well-known/ivoai`) answered;
- `tls`: `valid` (HTTPS with Web PKI validation, the same trust store as enrollment), `invalid`
  (handshake or certificate failed), `plaintext_loopback` (http to a loopback address: development),
  or `plaintext_refused` (http to anything else: never contacted);
- `protocol`: the server's protocol major and whether this ivoai speaks it;
- `credential`: `accepted`, `refused` (401), `insufficient_scope` (403 on the status route), `missing`
  (nothing stored), `unknown` (not asked: unreachable);
- `context` / `memory`: the statuses `/ready` reports for each service (`ok`, `unavailable`, …).

Results are cached for DOCTOR_SERVER_CACHE_SECONDS in `$XDG_CACHE_HOME/ivoai/doctor-servers.json`,
keyed by the profile's ID, URL, enrollment time and enabled flag (re-enrolling or editing a server
invalidates its entry); never a credential, header or token. Redirects are not followed.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ivoai.common.errors import IvoaiError
from ivoai.common.limits import (
    DOCTOR_SERVER_CACHE_SECONDS,
    DOCTOR_SERVER_PROBE_DEADLINE_SECONDS,
    DOCTOR_SERVER_PROBE_MAX_PARALLEL,
    DOCTOR_SERVER_RESPONSE_MAX_BYTES,
)
from ivoai.common.paths import XdgPaths
from ivoai.common.redact import redact

CACHE_FILE = "doctor-servers.json"
STATUS_ROUTE = "/v1/admin/status"


@dataclass
class ServerHealth:
    """What doctor found about one enrolled server (JSON-ready, no secret)."""

    alias: str
    id: str
    url: str
    enabled: bool
    reachable: bool | None = None
    tls: str = "unknown"
    protocol: int | None = None
    protocol_ok: bool | None = None
    server_version: str | None = None
    ready: str | None = None
    credential: str = "unknown"
    context: str | None = None
    memory: str | None = None
    latency_ms: int | None = None
    error: str | None = None
    checked_at: float = field(default_factory=time.time)
    cached: bool = False

    @property
    def ok(self) -> bool:
        return bool(
            self.reachable
            and self.tls in ("valid", "plaintext_loopback")
            and self.protocol_ok
            and self.credential == "accepted"
            and self.ready in ("ready", "ready_degraded")
        )

    def problem(self) -> str | None:
        """One line for doctor's problem list (enabled servers only), or None when healthy."""
        if not self.enabled or self.ok:
            return None
        if self.error:
            return f"server {self.alias}: {self.error}"
        parts = []
        if self.protocol_ok is False:
            parts.append(f"speaks protocol {self.protocol}")
        if self.credential != "accepted":
            parts.append(f"credential {self.credential.replace('_', ' ')}")
        if self.ready not in ("ready", "ready_degraded"):
            parts.append(f"readiness {self.ready}")
        return f"server {self.alias}: " + ", ".join(parts or ["not healthy"])

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


def _read_bounded(response: Any) -> bytes:
    data = bytearray()
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) > DOCTOR_SERVER_RESPONSE_MAX_BYTES:
            raise ValueError(f"answer larger than {DOCTOR_SERVER_RESPONSE_MAX_BYTES} bytes")
    return bytes(data)


def _get(client: Any, url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    with client.stream("GET", url, headers=headers or {}) as response:
        body = _read_bounded(response)
        status = response.status_code
    try:
        return status, json.loads(body) if body else None
    except ValueError:
        return status, None


def probe_one(profile: Any, credential: str | None, timeout: float) -> ServerHealth:
    """Probe one server (each request bounded by `timeout`); never raises."""
    import ssl

    import httpx2

    from ivoai.client.knowledge.profiles import origin_of
    from ivoai.common.net import is_loopback_host
    from ivoai.common.protocol import DISCOVERY_PATH, PROTOCOL_VERSION

    health = ServerHealth(profile.alias, profile.id, profile.base_url, profile.enabled)
    url = httpx2.URL(profile.base_url)
    loopback = is_loopback_host(url.host)
    if url.scheme == "http":
        if not loopback:
            health.tls = "plaintext_refused"
            health.error = f"{profile.base_url} is plaintext http to a non-loopback host; not contacted"
            return health
        health.tls = "plaintext_loopback"
    origin = origin_of(profile.base_url)
    started = time.monotonic()
    try:
        with httpx2.Client(timeout=timeout, follow_redirects=False, trust_env=not loopback) as client:
            status, doc = _get(client, profile.base_url + DISCOVERY_PATH)
            health.reachable = True
            if url.scheme == "https":
                health.tls = "valid"
            if status != 200 or not isinstance(doc, dict):
                health.error = f"discovery answered HTTP {status}; is this an ivoai server?"
                return health
            version = doc.get("protocol_version")
            health.protocol = version if isinstance(version, int) else None
            health.protocol_ok = health.protocol == PROTOCOL_VERSION
            health.server_version = str(doc.get("server_version", ""))[:64] or None
            ready_path = profile.endpoints.get("ready") or "/ready"
            _status, ready = _get(client, origin + (ready_path if ready_path.startswith("/") else "/ready"))
            if isinstance(ready, dict):
                health.ready = str(ready.get("status", "unknown"))
                raw_checks = ready.get("checks")
                checks: dict[str, Any] = raw_checks if isinstance(raw_checks, dict) else {}
                for kind in ("context", "memory"):
                    check = checks.get(kind)
                    if isinstance(check, dict):
                        setattr(health, kind, str(check.get("status", "unknown")))
            if credential is None:
                health.credential = "missing"
            else:
                code, _ = _get(client, origin + STATUS_ROUTE, {"authorization": f"Bearer {credential}"})
                health.credential = {200: "accepted", 401: "refused", 403: "insufficient_scope"}.get(
                    code, f"http_{code}"
                )
    except httpx2.ConnectError as exc:
        health.reachable = False
        if isinstance(exc.__cause__, ssl.SSLError) or "CERTIFICATE" in str(exc).upper() or "SSL" in str(exc):
            health.reachable = True  # it answered the TCP handshake; its certificate failed validation
            health.tls = "invalid"
            health.error = f"TLS validation failed for {origin}"
        else:
            health.error = f"cannot connect to {origin}"
    except httpx2.TimeoutException:
        health.error = f"{origin} did not answer within {timeout:g}s"
    except (httpx2.HTTPError, ValueError) as exc:
        health.error = f"{origin}: {type(exc).__name__}: {exc}"[:300]
    health.latency_ms = int((time.monotonic() - started) * 1000)
    if health.error:
        health.error = redact(health.error)
    return health


def _cache_key(profile: Any) -> list[Any]:
    return [profile.base_url, profile.enrolled_at, profile.enabled]


def _load_cache(paths: XdgPaths) -> dict[str, Any]:
    from ivoai.common.fsio import read_private_file_or_none

    try:
        raw = read_private_file_or_none(paths.cache, paths.cache / CACHE_FILE, 1024 * 1024)
        doc = json.loads(raw) if raw else {}
    except (IvoaiError, OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _save_cache(paths: XdgPaths, doc: dict[str, Any]) -> None:
    from ivoai.common.fsio import atomic_write
    from ivoai.common.jsonio import dumps_bytes

    # A cache that cannot be written only costs the next doctor run a probe.
    with contextlib.suppress(IvoaiError, OSError):
        atomic_write(paths.cache, paths.cache / CACHE_FILE, dumps_bytes(doc))


def probe_servers(
    paths: XdgPaths,
    *,
    deadline: float = DOCTOR_SERVER_PROBE_DEADLINE_SECONDS,
    use_cache: bool = True,
    now: float | None = None,
) -> list[ServerHealth]:
    """Every enrolled server's health, probed in parallel within `deadline` seconds (cached a minute).

    Raises:
        IvoaiError: the registry or the secrets store cannot be read.
    """
    from ivoai.client.config.secrets import SecretsStore
    from ivoai.client.connections.registry import ConnectionRegistry

    profiles = sorted(ConnectionRegistry(paths).load().servers, key=lambda p: p.alias)
    if not profiles:
        return []
    now = time.time() if now is None else now
    cache = _load_cache(paths) if use_cache else {}
    results: dict[str, ServerHealth] = {}
    todo = []
    for profile in profiles:
        entry = cache.get(profile.id)
        if (
            isinstance(entry, dict)
            and entry.get("key") == _cache_key(profile)
            and isinstance(entry.get("checked_at"), int | float)
            and 0 <= now - entry["checked_at"] < DOCTOR_SERVER_CACHE_SECONDS
            and isinstance(entry.get("result"), dict)
        ):
            fields = {k: v for k, v in entry["result"].items() if k in ServerHealth.__dataclass_fields__}
            fields["cached"] = True
            results[profile.id] = ServerHealth(**fields)
        else:
            todo.append(profile)
    if todo:
        store = SecretsStore(paths)
        credentials = {p.id: store.get(p.id) for p in todo}
        started = time.monotonic()
        pool = concurrent.futures.ThreadPoolExecutor(min(len(todo), DOCTOR_SERVER_PROBE_MAX_PARALLEL))
        try:
            futures = {pool.submit(probe_one, p, credentials[p.id], deadline): p for p in todo}
            done, _pending = concurrent.futures.wait(futures, timeout=deadline)
            for future, profile in futures.items():
                if future in done:
                    results[profile.id] = future.result()
                else:
                    health = ServerHealth(profile.alias, profile.id, profile.base_url, profile.enabled)
                    health.error = f"no answer within the {deadline:g}s doctor deadline"
                    health.latency_ms = int((time.monotonic() - started) * 1000)
                    results[profile.id] = health
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        for profile in todo:
            cache[profile.id] = {
                "key": _cache_key(profile),
                "checked_at": now,
                "result": results[profile.id].to_dict(),
            }
        known = {p.id for p in profiles}
        _save_cache(paths, {k: v for k, v in cache.items() if k in known})
    return [results[p.id] for p in profiles]
