"""Send spooled hook events to the memory hook route of their destination, in batches, idempotently.

One flusher at a time (the flush lock in `$XDG_STATE_HOME/ivoai/memoryhooks/flush.lock`). Hook
processes start it detached (`detached_main`); `ivoai memory hooks flush` runs it in the foreground.

Destinations. A spooled record names the knowledge source its session routed memory to (`dest`,
from `IVOAI_MEMORY_HOOK_SOURCE`), or none (a hook of the managed installation outside any ivoai
session). Records with a `dest` go through the session's knowledge router while it runs
(`IVOAI_MEMORY_HOOK_ROUTER` + the router's capability in `IVOAI_KNOWLEDGE_TOKEN_HOOKS`): the router
holds the upstream credential and forwards the batch to that source's primary. Otherwise, and when the
router is gone (the session ended), the flusher posts directly to the source's primary with the
stored credential: sent only in the `Authorization` header of a request to that server's own origin,
never in argv, a URL or a log line. Records without a `dest` go to the configured hook destination
(`ivoai memory hooks destination`), else to the only enrolled memory source.

Batches: consecutive records with the same destination, at most MEMORY_HOOK_BATCH_MAX_EVENTS events
and MEMORY_HOOK_FLUSH_BATCH_MAX_BYTES. Idempotent: every event carries its own idempotency key, so a
batch resent after an uncertain outcome (timeout, lost connection, a flusher killed before it recorded
its progress) is stored once: the server answers `duplicate` for keys it has.

Outcomes: 200 -> the batch's events are acknowledged (applied, duplicate or rejected; a rejected event
is malformed and never retried); 400/413 -> the batch is split until the bad event is isolated and
dropped (counted); 401/403, 5xx, timeouts and connection failures -> nothing is dropped, the error is
recorded for `status`, and retries back off (1, 2, 4 … 60 s).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ivoai.client.memoryhooks import spool
from ivoai.client.memoryhooks import state as hook_state
from ivoai.client.memoryhooks.locations import CONFIG_FILE, FLUSH_LOCK, HOOKS_DIR, state_root
from ivoai.common.errors import IvoaiError
from ivoai.common.limits import (
    MEMORY_HOOK_BATCH_MAX_EVENTS,
    MEMORY_HOOK_FLUSH_BATCH_MAX_BYTES,
    MEMORY_HOOK_FLUSH_HTTP_TIMEOUT_SECONDS,
    MEMORY_HOOK_FLUSH_LOCK_WAIT_SECONDS,
    MEMORY_HOOK_FLUSH_RUN_MAX_SECONDS,
)
from ivoai.common.paths import XdgPaths, xdg_paths
from ivoai.common.redact import redact

HOOK_BATCH_PATH = "/hook/batch"
DEFAULT_HOOKS_ENDPOINT = "/v1/memory"  # DiscoveryDocument.memory_hooks_endpoint
ROUTER_ENV = "IVOAI_MEMORY_HOOK_ROUTER"
ROUTER_TOKEN_ENV = "IVOAI_KNOWLEDGE_TOKEN_HOOKS"
SOURCE_ENV = "IVOAI_MEMORY_HOOK_SOURCE"
RESPONSE_MAX_BYTES = 4 * 1024 * 1024
ROUTER_HOOK_ROUTE = "/v1/memory/hook/batch"


class FlushError(IvoaiError):
    """A batch could not be delivered; `retryable` events stay spooled."""

    code = "memory_hook_flush_failed"

    def __init__(self, message: str, *, code: str, destination: str | None, retryable: bool = True) -> None:
        super().__init__(redact(message))
        self.code = code
        self.destination = destination
        self.retryable = retryable


@dataclass
class Target:
    """Where one batch goes: the router (loopback) or a source's primary (direct)."""

    via: str  # "router" | "direct"
    url: str
    destination: str  # the source ID (and the alias of the server for direct posts)
    label: str
    credential: str = field(repr=False)


@dataclass
class FlushReport:
    sent: int = 0
    duplicates: int = 0
    rejected: int = 0
    corrupt: int = 0
    batches: int = 0
    via_router: int = 0
    via_direct: int = 0
    error: str | None = None
    error_code: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "corrupt_lines": self.corrupt,
            "batches": self.batches,
            "via_router": self.via_router,
            "via_direct": self.via_direct,
            "error": self.error,
            "error_code": self.error_code,
        }


def configured_destination(paths: XdgPaths) -> str | None:
    """The hook destination chosen with `ivoai memory hooks destination` (None when unset)."""
    try:
        raw = (paths.config / CONFIG_FILE).read_bytes()
        doc = json.loads(raw)
    except (OSError, ValueError):
        return None
    value = doc.get("destination") if isinstance(doc, dict) else None
    return value if isinstance(value, str) and value else None


_TLS: list[Any] = []


def _tls_context() -> Any:
    """The Web PKI context (httpx2's, as enrollment uses), built once per process: loading the CA
    bundle costs ~0.1 s, which every new client would otherwise pay again."""
    if not _TLS:
        import httpx2

        _TLS.append(httpx2.create_ssl_context())
    return _TLS[0]


def _records(data: bytes, offset: int) -> list[tuple[int, dict[str, Any] | None]]:
    """(end offset, record or None for a torn/invalid line) for every line after `offset`."""
    out: list[tuple[int, dict[str, Any] | None]] = []
    pos = offset
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        line = data[pos:end].strip()
        record: dict[str, Any] | None = None
        if line:
            try:
                doc = json.loads(line)
            except ValueError:
                doc = None
            if isinstance(doc, dict) and doc.get("v") == 1 and isinstance(doc.get("event"), dict):
                record = doc
            out.append((end, record))
        pos = end
    return out


class Flusher:
    """Drains the spool; the caller holds the flush lock."""

    def __init__(self, paths: XdgPaths | None = None, env: Mapping[str, str] | None = None) -> None:
        self.env = os.environ if env is None else env
        self.paths = paths or xdg_paths()
        self.state_root = state_root(self.env)
        self.report = FlushReport()
        self._clients: dict[tuple[str, bool], Any] = {}
        self._router_usable = bool(self.env.get(ROUTER_ENV) and self.env.get(ROUTER_TOKEN_ENV))
        self._registry: Any = None

    # ---- destinations ----

    def _memory_sources(self) -> list[Any]:
        from ivoai.client.connections.registry import ConnectionRegistry
        from ivoai.client.knowledge.profiles import build_sources

        if self._registry is None:
            self._registry = ConnectionRegistry(self.paths).load()
        return [s for s in build_sources(self._registry.servers) if "memory" in s.kinds]

    def _router_target(self, dest: str) -> Target | None:
        base = self.env.get(ROUTER_ENV, "")
        token = self.env.get(ROUTER_TOKEN_ENV, "")
        if not self._router_usable or not base.startswith("http://127.0.0.1:") or not token:
            return None
        from urllib.parse import quote

        url = base.rstrip("/") + ROUTER_HOOK_ROUTE + "?knowledge_source=" + quote(dest, safe="")
        return Target("router", url, dest, f"the session router ({dest})", token)

    def _direct_target(self, dest: str | None) -> Target:
        from ivoai.client.config.secrets import SecretsStore

        sources = self._memory_sources()
        if dest is not None:
            chosen = [s for s in sources if dest in s.names()]
            if not chosen:
                raise FlushError(
                    f"memory destination {dest!r} is no longer an enabled memory source",
                    code="destination_missing",
                    destination=dest,
                    retryable=False,
                )
        else:
            wanted = configured_destination(self.paths)
            if wanted is not None:
                chosen = [s for s in sources if wanted in s.names()]
                if not chosen:
                    raise FlushError(
                        f"the configured hook destination {wanted!r} is not an enabled memory source; "
                        "change it with `ivoai memory hooks destination SOURCE`",
                        code="destination_missing",
                        destination=wanted,
                    )
            elif not sources:
                raise FlushError(
                    "no enabled ivoai server offers memory; enroll one with "
                    "`ivoai connect server add ALIAS --url URL --code-stdin`",
                    code="no_destination",
                    destination=None,
                )
            elif len(sources) > 1:
                raise FlushError(
                    f"{len(sources)} memory sources are enrolled ({', '.join(s.id for s in sources)}); "
                    "choose where hook events go with `ivoai memory hooks destination SOURCE`",
                    code="ambiguous_destination",
                    destination=None,
                )
            else:
                chosen = sources
        source = chosen[0]
        primary = source.primary  # writes go to the primary only, never to a standby
        if primary.features.get("memory_hooks") is False:
            raise FlushError(
                f"{primary.alias} does not accept hook events (feature memory_hooks is off)",
                code="hooks_unsupported",
                destination=source.id,
            )
        credential = SecretsStore(self.paths).get(primary.id)
        if not credential:
            raise FlushError(
                f"{primary.alias} has no stored credential; "
                f"run `ivoai connect server re-enroll {primary.alias}`",
                code="no_credential",
                destination=source.id,
            )
        path = primary.endpoints.get("memory_hooks") or DEFAULT_HOOKS_ENDPOINT
        if not path.startswith("/") or path.startswith("//"):
            path = DEFAULT_HOOKS_ENDPOINT
        url = primary.origin + path.rstrip("/") + HOOK_BATCH_PATH
        return Target("direct", url, source.id, f"{primary.alias} ({primary.origin})", credential)

    # ---- HTTP ----

    def _client(self, url: str) -> Any:
        import httpx2

        from ivoai.common.net import is_loopback_host

        loopback = is_loopback_host(httpx2.URL(url).host)
        key = (httpx2.URL(url).scheme + "://" + httpx2.URL(url).netloc.decode(), loopback)
        client = self._clients.get(key)
        if client is None:
            client = httpx2.Client(
                timeout=MEMORY_HOOK_FLUSH_HTTP_TIMEOUT_SECONDS,
                follow_redirects=False,
                trust_env=not loopback,
                verify=_tls_context(),
                headers={"user-agent": "ivoai-memory-hooks/1"},
            )
            self._clients[key] = client
        return client

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def _post(self, target: Target, body: bytes, count: int) -> tuple[int, Any]:
        """(HTTP status, parsed JSON or None). Raises FlushError for transport failures."""
        import httpx2

        client = self._client(target.url)
        try:
            with client.stream(
                "POST",
                target.url,
                content=body,
                headers={"content-type": "application/json", "authorization": f"Bearer {target.credential}"},
            ) as response:
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > RESPONSE_MAX_BYTES:
                        raise FlushError(
                            f"{target.label} answered more than {RESPONSE_MAX_BYTES} bytes",
                            code="response_too_large",
                            destination=target.destination,
                        )
                status = response.status_code
        except httpx2.TimeoutException:
            raise FlushError(
                f"{target.label} did not answer within {MEMORY_HOOK_FLUSH_HTTP_TIMEOUT_SECONDS:g}s "
                f"({count} events kept; resending is safe)",
                code="timeout",
                destination=target.destination,
            ) from None
        except httpx2.HTTPError as exc:
            raise FlushError(
                f"cannot reach {target.label}: {type(exc).__name__}",
                code="unreachable",
                destination=target.destination,
            ) from None
        try:
            parsed = json.loads(bytes(data)) if data else None
        except ValueError:
            parsed = None
        return status, parsed

    # ---- sending ----

    def _send(self, dest: str | None, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Deliver `events`; returns one result per event (status applied/duplicate/rejected)."""
        target = self._router_target(dest) if dest is not None else None
        if target is not None:
            try:
                return self._send_to(target, events)
            except FlushError as exc:
                if exc.code not in ("unreachable", "router_unknown_source"):
                    raise
                self._router_usable = False  # the session ended (or never routed this source)
        return self._send_to(self._direct_target(dest), events)

    def _send_to(self, target: Target, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        body = json.dumps({"events": events}, ensure_ascii=False, separators=(",", ":")).encode()
        status, parsed = self._post(target, body, len(events))
        self.report.batches += 1
        if status == 200 and isinstance(parsed, dict) and isinstance(parsed.get("results"), list):
            results: list[dict[str, Any]] = parsed["results"]
            if len(results) == len(events) and all(isinstance(r, dict) for r in results):
                if target.via == "router":
                    self.report.via_router += len(events)
                else:
                    self.report.via_direct += len(events)
                return results
            raise FlushError(
                f"{target.label} answered a malformed hook result",
                code="bad_response",
                destination=target.destination,
            )
        detail = ""
        if isinstance(parsed, dict):
            detail = str(parsed.get("message") or parsed.get("error") or "")[:200]
        if target.via == "router" and status == 404:
            raise FlushError(
                detail or "unknown source", code="router_unknown_source", destination=target.destination
            )
        if status in (400, 413, 422):
            if len(events) > 1:
                half = len(events) // 2
                return self._send_to(target, events[:half]) + self._send_to(target, events[half:])
            return [
                {
                    "idempotency_key": events[0].get("idempotency_key", ""),
                    "status": "rejected",
                    "error_code": f"http_{status}",
                    "error": detail or f"HTTP {status}",
                }
            ]
        if status == 401:
            raise FlushError(
                f"{target.label} refused the stored credential (HTTP 401); events are kept. Re-enroll with "
                f"`ivoai connect server re-enroll ALIAS`",
                code="credential_refused",
                destination=target.destination,
            )
        if status == 403:
            raise FlushError(
                f"{target.label} refused hook events: the credential lacks the memory:write scope (HTTP 403)",
                code="insufficient_scope",
                destination=target.destination,
            )
        if 300 <= status < 400:
            raise FlushError(
                f"{target.label} answered a redirect (HTTP {status}); "
                "ivoai does not follow it with a credential",
                code="redirect_refused",
                destination=target.destination,
            )
        raise FlushError(
            f"{target.label} answered HTTP {status}{': ' + detail if detail else ''}; events are kept",
            code="server_error",
            destination=target.destination,
        )

    def _deliver(self, dest: str | None, records: list[dict[str, Any]], doc: dict[str, Any]) -> None:
        events = [r["event"] for r in records]
        try:
            results = self._send(dest, events)
        except FlushError as exc:
            if exc.retryable:
                raise
            # The destination is gone for good: these events can never be delivered.
            self.report.rejected += len(events)
            doc["rejected_events"] = int(doc.get("rejected_events", 0)) + len(events)
            doc["last_rejection"] = {"message": exc.message, "code": exc.code, "at": time.time()}
            return
        now = time.time()
        clients = doc.setdefault("clients", {})
        for record, result in zip(records, results, strict=True):
            status = result.get("status")
            agent = str(record["event"].get("agent", "unknown"))
            if status == "applied":
                self.report.sent += 1
                doc["sent_events"] = int(doc.get("sent_events", 0)) + 1
            elif status == "duplicate":
                self.report.duplicates += 1
                doc["duplicate_events"] = int(doc.get("duplicate_events", 0)) + 1
            else:
                self.report.rejected += 1
                doc["rejected_events"] = int(doc.get("rejected_events", 0)) + 1
                doc["last_rejection"] = {
                    "message": redact(str(result.get("error") or "rejected"))[:300],
                    "code": str(result.get("error_code") or "rejected"),
                    "at": now,
                }
                continue
            clients.setdefault(agent, {})["last_sent_at"] = now
            doc["last_sent_at"] = now

    def flush_once(self) -> FlushReport:
        """Send everything spooled now. Raises FlushError on the first batch that fails (it stays spooled)."""
        doc = hook_state.load(self.state_root)
        doc["last_attempt_at"] = time.time()
        dir_fd = spool.open_spool(self.state_root)
        try:
            for name in spool.seal_active(dir_fd):
                data = spool.read_segment(dir_fd, name)
                if data is None:
                    continue
                offset = spool.read_offset(dir_fd, name)
                if offset > len(data) or (offset and data[offset - 1 : offset] != b"\n"):
                    offset = 0  # not a line boundary of this segment: resend it all (idempotent)
                batch: list[dict[str, Any]] = []
                batch_dest: str | None = None
                batch_bytes = 0
                batch_end = offset
                line_start = offset
                for end, record in _records(data, offset):
                    size, line_start = end - line_start, end  # the line's length bounds its event's JSON
                    if record is None:
                        self.report.corrupt += 1
                        doc["corrupt_lines"] = int(doc.get("corrupt_lines", 0)) + 1
                        if not batch:
                            batch_end = end
                        continue
                    dest = record.get("dest") if isinstance(record.get("dest"), str) else None
                    if batch and (
                        dest != batch_dest
                        or len(batch) >= MEMORY_HOOK_BATCH_MAX_EVENTS
                        or batch_bytes + size > MEMORY_HOOK_FLUSH_BATCH_MAX_BYTES
                    ):
                        self._deliver(batch_dest, batch, doc)
                        spool.set_offset(dir_fd, name, batch_end)
                        batch, batch_bytes = [], 0
                    batch.append(record)
                    batch_dest = dest
                    batch_bytes += size
                    batch_end = end
                if batch:
                    self._deliver(batch_dest, batch, doc)
                spool.drop_segment(dir_fd, name)
        except FlushError as exc:
            doc["last_error"] = {
                "message": exc.message,
                "code": exc.code,
                "destination": exc.destination,
                "at": time.time(),
            }
            doc["failures"] = int(doc.get("failures", 0)) + 1
            doc["next_attempt_at"] = time.time() + hook_state.backoff_seconds(doc["failures"])
            self.report.error, self.report.error_code = exc.message, exc.code
            hook_state.save(self.state_root, doc)
            raise
        finally:
            os.close(dir_fd)
        doc["failures"] = 0
        doc["next_attempt_at"] = None
        doc["last_success_at"] = time.time()
        doc["last_error"] = None
        hook_state.save(self.state_root, doc)
        return self.report

    def run(self) -> FlushReport:
        """Flush until the spool is empty or a batch fails (then `report.error` says why; nothing is lost)."""
        try:
            while True:
                try:
                    self.flush_once()
                except FlushError:
                    return self.report
                if spool.is_empty(self.state_root):
                    return self.report
        finally:
            self.close()


def _lock_fd(root: str) -> int:
    from ivoai.common.lightio import open_private_dirs

    dir_fd = open_private_dirs(root, HOOKS_DIR)
    try:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(FLUSH_LOCK, flags, 0o600, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def _try_lock(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def flush_now(
    paths: XdgPaths | None = None,
    env: Mapping[str, str] | None = None,
    *,
    wait_seconds: float = MEMORY_HOOK_FLUSH_LOCK_WAIT_SECONDS,
) -> FlushReport:
    """`ivoai memory hooks flush`: one foreground flush (ignores the backoff).

    Raises:
        FlushError: (code `busy`) another flusher kept the lock longer than `wait_seconds`.
    """
    env = os.environ if env is None else env
    root = state_root(env)
    fd = _lock_fd(root)
    try:
        deadline = time.monotonic() + wait_seconds
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                raise FlushError(
                    f"another flusher is still sending after {wait_seconds:g}s; try again later",
                    code="busy",
                    destination=None,
                )
            time.sleep(0.05)  # waiting for another process's lock (no notification exists for flock)
        return Flusher(paths, env).run()
    finally:
        os.close(fd)


def detached_main() -> None:
    """Entry of the background flusher started by a hook process; argv[1] is the inherited lock fd."""
    try:
        fd = int(sys.argv[1])
        os.closerange(3, fd)  # the host's leaked descriptors: never hold its pipes open
        os.closerange(fd + 1, 1 << 16)
        root = state_root()
        started = time.monotonic()
        while True:
            report = Flusher().run()
            # Release the lock before looking again (a hook may have appended meanwhile) and while
            # waiting out a backoff, so `ivoai memory hooks flush` is never blocked by a sleeping flusher.
            os.close(fd)
            if spool.is_empty(root):
                break
            if report.error_code is not None:
                failures = int(hook_state.load(root).get("failures", 1))
                wait = hook_state.backoff_seconds(failures)
                if time.monotonic() - started + wait > MEMORY_HOOK_FLUSH_RUN_MAX_SECONDS:
                    break
                time.sleep(wait)  # a detached background process waiting out its own backoff
            fd = _lock_fd(root)
            if not _try_lock(fd):
                break  # another flusher (a hook's, or `ivoai memory hooks flush`) has it
    except BaseException:  # noqa: BLE001 - a detached helper has nowhere to report but its state file
        pass
    finally:
        os._exit(0)
