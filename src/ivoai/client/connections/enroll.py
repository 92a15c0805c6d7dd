"""The server enrollment client: discovery checks, the one-time code exchange, persistence, then probes.

Order matters (seed 002, "Protocol version 1"):
1. before the code is sent: HTTPS with Web PKI validation (plaintext only to loopback), discovery
   at `/.well-known/ivoai` with protocol major 1 and same-origin endpoint paths, `/health` alive
   and `/ready` reporting `ready` or `ready_degraded`; a redirect to another origin stops everything;
2. the exchange (`POST /v1/enroll` with the code in a JSON body, never a URL; no redirect followed);
3. the credential (secrets store, under the profile's opaque ID) and the registry entry are written;
4. only then the context and memory probes run; their failures become warnings stored on the
   profile, so a consumed code never strands the credential it bought.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx2

from ivoai.client.config.secrets import SecretsStore, new_secret_id
from ivoai.client.connections.errors import EnrollmentError, InsecureServerError, RedirectRefusedError
from ivoai.client.connections.registry import ConnectionRegistry, now_iso
from ivoai.client.connections.urls import normalize_server_url
from ivoai.client.knowledge.profiles import (
    PRIORITY_DEFAULT,
    ServerProfile,
    origin_of,
    validate_name,
    validate_priority,
)
from ivoai.common.errors import ConflictError, ValidationError
from ivoai.common.limits import (
    ENROLL_DISCOVERY_MAX_BYTES,
    ENROLL_HTTP_TIMEOUT_SECONDS,
    ENROLL_MAX_SAME_ORIGIN_REDIRECTS,
    ENROLL_PROBE_TIMEOUT_SECONDS,
    ENROLL_RESPONSE_MAX_BYTES,
)
from ivoai.common.net import is_loopback_host
from ivoai.common.paths import XdgPaths
from ivoai.common.protocol import DISCOVERY_PATH, PROTOCOL_VERSION, DiscoveryDocument, EnrollResponse

READY_STATES = ("ready", "ready_degraded")
CODE_MAX_CHARS = 256


@dataclass(frozen=True)
class Discovery:
    """What the pre-exchange checks established."""

    base_url: str
    document: DiscoveryDocument
    ready_status: str


@dataclass(frozen=True)
class ProbeResult:
    kind: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class EnrollResult:
    profile: ServerProfile
    probes: tuple[ProbeResult, ...]

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.profile.warnings


def _client(base_url: str) -> httpx2.Client:
    loopback = is_loopback_host(httpx2.URL(base_url).host)
    return httpx2.Client(
        timeout=ENROLL_HTTP_TIMEOUT_SECONDS,
        follow_redirects=False,
        trust_env=not loopback,
        headers={"accept": "application/json", "user-agent": "ivoai-enroll/1"},
    )


def _read_bounded(response: httpx2.Response, limit: int, what: str) -> bytes:
    data = bytearray()
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) > limit:
            raise EnrollmentError(f"{what} is larger than {limit} bytes; this is not an ivoai server")
    return bytes(data)


def _request(
    client: httpx2.Client, method: str, url: str, *, limit: int, what: str, follow: bool, **kwargs: Any
) -> tuple[int, bytes]:
    """One request; same-origin redirects followed only for GETs; any other redirect refused."""
    origin = origin_of(url)
    for _ in range(ENROLL_MAX_SAME_ORIGIN_REDIRECTS + 1):
        try:
            with client.stream(method, url, **kwargs) as response:
                if response.is_redirect:
                    location = response.headers.get("location", "")
                    target = str(response.url.join(location))
                    if origin_of(target) != origin:
                        raise RedirectRefusedError(
                            f"{what}: the server redirected to another origin ({origin_of(target)}); "
                            "ivoai never follows a cross-origin redirect during discovery or enrollment"
                        )
                    if not follow:
                        raise RedirectRefusedError(
                            f"{what}: unexpected redirect; no enrollment code was sent there"
                        )
                    url = target
                    continue
                return response.status_code, _read_bounded(response, limit, what)
        except httpx2.ConnectError as exc:
            if isinstance(exc.__cause__, ssl.SSLError) or "CERTIFICATE" in str(exc).upper():
                raise InsecureServerError(f"{what}: TLS validation failed for {origin} ({exc})") from None
            raise EnrollmentError(f"{what}: cannot connect to {origin} ({exc})") from None
        except httpx2.TimeoutException:
            raise EnrollmentError(
                f"{what}: {origin} did not answer within {ENROLL_HTTP_TIMEOUT_SECONDS:g}s"
            ) from None
        except httpx2.HTTPError as exc:
            raise EnrollmentError(f"{what}: HTTP error talking to {origin}: {type(exc).__name__}") from None
    raise EnrollmentError(f"{what}: more than {ENROLL_MAX_SAME_ORIGIN_REDIRECTS} redirects")


def _json(body: bytes, what: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        raise EnrollmentError(f"{what}: the answer is not JSON; is this an ivoai server?") from None


def _endpoint(base: str, path: str, field: str) -> str:
    if not path.startswith("/") or path.startswith("//"):
        raise EnrollmentError(
            f"discovery field {field} must be a path on the server's own origin, got {path!r}"
        )
    return origin_of(base) + path


def discover(base_url: str) -> Discovery:
    """Run every pre-exchange check against `base_url` (already normalized).

    Raises:
        RedirectRefusedError, InsecureServerError, EnrollmentError: a check failed; no code was sent.
    """
    with _client(base_url) as client:
        status, body = _request(
            client,
            "GET",
            base_url + DISCOVERY_PATH,
            limit=ENROLL_DISCOVERY_MAX_BYTES,
            what="discovery",
            follow=True,
        )
        if status != 200:
            raise EnrollmentError(
                f"discovery: {base_url}{DISCOVERY_PATH} answered HTTP {status}; is this an ivoai server?"
            )
        try:
            doc = DiscoveryDocument.model_validate(_json(body, "discovery"))
        except ValueError as exc:
            raise EnrollmentError(
                f"discovery: the document is not protocol-1 shaped ({type(exc).__name__})"
            ) from None
        if doc.protocol_version != PROTOCOL_VERSION:
            raise EnrollmentError(
                f"discovery: the server speaks protocol {doc.protocol_version}; this ivoai speaks "
                f"{PROTOCOL_VERSION} (upgrade the older side)"
            )
        for field in (
            "health_endpoint",
            "ready_endpoint",
            "enrollment_endpoint",
            "context_mcp_endpoint",
            "memory_mcp_endpoint",
        ):
            _endpoint(base_url, str(getattr(doc, field)), field)

        def get(field: str, what: str) -> tuple[int, bytes]:
            url = _endpoint(base_url, str(getattr(doc, field)), field)
            return _request(client, "GET", url, limit=ENROLL_RESPONSE_MAX_BYTES, what=what, follow=True)

        status, _ = get("health_endpoint", "health")
        if status != 200:
            raise EnrollmentError(f"health: the server is not healthy (HTTP {status}); no code was sent")
        status, body = get("ready_endpoint", "readiness")
        try:
            ready = _json(body, "readiness")
        except EnrollmentError:
            ready = {}
        ready_status = str(ready.get("status", "")) if isinstance(ready, dict) else ""
        if ready_status not in READY_STATES:
            raise EnrollmentError(
                f"readiness: the server is not ready (HTTP {status}, status {ready_status or 'unknown'!r}); "
                "no code was sent; try again when `/ready` reports ready or ready_degraded"
            )
    return Discovery(base_url, doc, ready_status)


def exchange(discovery: Discovery, code: str) -> EnrollResponse:
    """POST the one-time code; return the credential.

    Raises:
        EnrollmentError: refused (the uniform invalid/expired/used/revoked error) or failed mid-way.
    """
    url = _endpoint(discovery.base_url, discovery.document.enrollment_endpoint, "enrollment_endpoint")
    with _client(discovery.base_url) as client:
        try:
            status, body = _request(
                client,
                "POST",
                url,
                limit=ENROLL_RESPONSE_MAX_BYTES,
                what="enrollment",
                follow=False,
                json={"code": code},
            )
        except RedirectRefusedError:
            raise
        except EnrollmentError as exc:
            raise EnrollmentError(
                f"{exc}; the code may have been consumed: if a retry is refused, "
                "create a new one with `ivoai server enrollment create`"
            ) from None
    if status != 200:
        raise EnrollmentError(
            f"enrollment: the server refused the code (HTTP {status}): it is invalid, expired, already used "
            "or revoked; create a new one with `ivoai server enrollment create`"
        )
    try:
        return EnrollResponse.model_validate(_json(body, "enrollment"))
    except ValueError:
        raise EnrollmentError(
            "enrollment: the answer lacks a credential; the code is consumed, create a new one"
        ) from None


def validate_code(code: str) -> str:
    code = code.strip()
    if not code:
        raise ValidationError("enrollment code is empty (pipe it on stdin with --code-stdin)")
    if len(code) > CODE_MAX_CHARS or any(c.isspace() or not c.isprintable() for c in code):
        raise ValidationError(
            f"enrollment code must be one line of at most {CODE_MAX_CHARS} printable characters"
        )
    return code


def probe(
    profile: ServerProfile, credential: str, *, timeout: float = ENROLL_PROBE_TIMEOUT_SECONDS
) -> list[ProbeResult]:
    """Call `context_health` and `memory_status` through the MCP SDK client (each bounded by `timeout`)."""
    import anyio

    from ivoai.client.knowledge.upstream import open_session

    tools = {"context": "context_health", "memory": "memory_status"}
    results: list[ProbeResult] = []

    async def one(kind: str) -> ProbeResult:
        if not profile.features.get(kind, False):
            return ProbeResult(kind, False, "not offered by the server (feature off)")
        try:
            with anyio.fail_after(timeout):
                async with open_session(profile.endpoint_url(kind), credential) as session:  # type: ignore[arg-type]
                    result = await session.call_tool(tools[kind], {})
        except TimeoutError:
            return ProbeResult(kind, False, f"no answer within {timeout:g}s")
        except Exception as exc:  # noqa: BLE001 - a probe failure is a warning, never an enrollment failure
            return ProbeResult(kind, False, _describe(exc))
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)[:200]
            return ProbeResult(kind, False, f"{tools[kind]} reported an error: {text}")
        return ProbeResult(kind, True, "ok")

    async def main() -> None:
        for kind in ("context", "memory"):
            results.append(await one(kind))

    anyio.run(main)
    return results


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:300]


def _probe_warnings(probes: list[ProbeResult]) -> tuple[str, ...]:
    return tuple(
        f"{p.kind} probe failed: {p.detail}" for p in probes if not p.ok and "feature off" not in p.detail
    )


def _profile_from(
    discovery: Discovery,
    enrolled: EnrollResponse,
    *,
    profile_id: str,
    alias: str,
    purpose: str,
    group: str | None,
    priority: int,
    enabled: bool = True,
) -> ServerProfile:
    doc = discovery.document
    endpoints = {
        "health": doc.health_endpoint,
        "ready": doc.ready_endpoint,
        "enrollment": doc.enrollment_endpoint,
        "context_mcp": doc.context_mcp_endpoint,
        "memory_mcp": doc.memory_mcp_endpoint,
    }
    features = {k: bool(v) for k, v in doc.features.model_dump().items() if isinstance(v, bool)}
    return ServerProfile(
        id=profile_id,
        alias=alias,
        base_url=discovery.base_url,
        purpose=purpose,
        redundancy_group=group,
        priority=priority,
        enabled=enabled,
        client_id=enrolled.client_id,
        scopes=tuple(enrolled.scopes),
        protocol_version=doc.protocol_version,
        server_version=doc.server_version,
        endpoints=endpoints,
        features=features,
        enrolled_at=now_iso(),
        warnings=(
            ("server reports ready_degraded (memory may be unavailable)",)
            if discovery.ready_status == "ready_degraded"
            else ()
        ),
    )


ProbeFn = Callable[[ServerProfile, str], list[ProbeResult]]


def _finish(
    paths: XdgPaths, profile: ServerProfile, credential: str, probe_fn: ProbeFn | None
) -> EnrollResult:
    probes = (probe_fn or probe)(profile, credential)
    warnings = profile.warnings + _probe_warnings(probes)
    if warnings != profile.warnings:
        with ConnectionRegistry(paths).update() as state:
            current = next((p for p in state.servers if p.id == profile.id), None)
            if current is not None:
                profile = replace(current, warnings=warnings)
                state.replace_server(profile)
    return EnrollResult(profile, tuple(probes))


def add_server(
    paths: XdgPaths,
    alias: str,
    url: str,
    code: str,
    *,
    purpose: str | None = None,
    group: str | None = None,
    priority: int = PRIORITY_DEFAULT,
    probe_fn: ProbeFn | None = None,
    progress: Callable[[str], None] | None = None,
) -> EnrollResult:
    """Enroll a new server under `alias` (see the module docstring for the order of steps).

    Raises:
        ValidationError: bad alias, purpose, group, priority, URL or code.
        ConflictError: `alias` is already enrolled (nothing was sent to the server).
        EnrollmentError: a pre-exchange check or the exchange failed.
    """
    validate_name("alias", alias)
    purpose = validate_name("purpose", purpose) if purpose else alias
    if group is not None:
        validate_name("redundancy group", group)
    validate_priority(priority)
    base = normalize_server_url(url)
    code = validate_code(code)
    registry = ConnectionRegistry(paths)
    existing = registry.load()
    if any(p.alias == alias for p in existing.servers):
        raise ConflictError(
            f"server {alias!r} is already enrolled (its credential is kept); no code was sent. "
            f"Use `ivoai connect server test {alias}` to re-probe it or `re-enroll {alias}` with a new code"
        )
    say = progress or (lambda _msg: None)
    say(f"checking {base}: discovery, protocol, health, readiness")
    discovery = discover(base)
    say("exchanging the one-time code")
    enrolled = exchange(discovery, code)
    profile = _profile_from(
        discovery,
        enrolled,
        profile_id=new_secret_id("srv"),
        alias=alias,
        purpose=purpose,
        group=group,
        priority=priority,
    )
    # Persist before any probe: the code is spent, the credential must not be lost.
    store = SecretsStore(paths)
    store.put(profile.id, enrolled.credential)
    try:
        with registry.update() as state:
            if any(p.alias == alias for p in state.servers):
                raise ConflictError(
                    f"server {alias!r} was enrolled by another ivoai process meanwhile; this exchange's "
                    f"credential was discarded: revoke client {enrolled.client_id} on the server"
                )
            state.servers.append(profile)
    except ConflictError:
        store.delete(profile.id)
        raise
    say("credential saved; probing context and memory")
    return _finish(paths, profile, enrolled.credential, probe_fn)


def re_enroll(
    paths: XdgPaths,
    alias: str,
    code: str,
    *,
    probe_fn: ProbeFn | None = None,
    progress: Callable[[str], None] | None = None,
) -> EnrollResult:
    """Exchange a new code for an enrolled server; the old credential is replaced only on success.

    Raises:
        NotFoundError: no such alias.
        EnrollmentError: checks or exchange failed (the existing credential is untouched).
    """
    code = validate_code(code)
    registry = ConnectionRegistry(paths)
    current = registry.load().server(alias)
    say = progress or (lambda _msg: None)
    say(f"checking {current.base_url}: discovery, protocol, health, readiness")
    discovery = discover(current.base_url)
    say("exchanging the one-time code")
    enrolled = exchange(discovery, code)
    profile = _profile_from(
        discovery,
        enrolled,
        profile_id=current.id,
        alias=current.alias,
        purpose=current.purpose,
        group=current.redundancy_group,
        priority=current.priority,
        enabled=current.enabled,
    )
    SecretsStore(paths).put(profile.id, enrolled.credential)
    with registry.update() as state:
        state.server(alias)
        state.replace_server(profile)
    return _finish(paths, profile, enrolled.credential, probe_fn)


def probe_server(paths: XdgPaths, alias: str, *, probe_fn: ProbeFn | None = None) -> EnrollResult:
    """Live probe of an enrolled server with its stored credential; records the warnings."""
    profile = ConnectionRegistry(paths).load().server(alias)
    credential = SecretsStore(paths).get(profile.id)
    if credential is None:
        raise EnrollmentError(
            f"server {alias!r} has no stored credential; run `ivoai connect server re-enroll {alias}`"
        )
    discovery_warning: tuple[str, ...] = ()
    try:
        discovery = discover(profile.base_url)
        if discovery.ready_status == "ready_degraded":
            discovery_warning = ("server reports ready_degraded (memory may be unavailable)",)
    except EnrollmentError as exc:
        discovery_warning = (f"discovery failed: {exc}",)
    probes = (probe_fn or probe)(profile, credential)
    warnings = discovery_warning + _probe_warnings(probes)
    with ConnectionRegistry(paths).update() as state:
        current = state.server(alias)
        profile = replace(current, warnings=warnings)
        state.replace_server(profile)
    return EnrollResult(profile, tuple(probes))
