"""Runtime facts about each client: version, login, quota and model catalogue (real binaries only).

- Codex: one `codex app-server` conversation gives the version (user agent), the login
  (`account/read`), the quota (`account/rateLimits/read` plus any `account/rateLimits/updated`
  seen) and, when the cache lacks it, the catalogue (`model/list`).
- Claude: `claude --version`, `claude auth status` (JSON `loggedIn`), and on a cache miss the
  catalogue from the `initialize` control request of `claude -p --input-format stream-json`.
  Claude has no quota query: its windows come from the statusline and worker events (`pending`
  until first seen).

Catalogues are cached per client version below `$XDG_CACHE_HOME/ivoai/catalogues/` (0600, atomic).
Every probe runs with the allowlisted probe environment and a deadline; a failure leaves the
quota unknown (never exhausted) and says why.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ivoai.client.agents.childenv import probe_env
from ivoai.client.agents.executors import EXECUTORS, discover
from ivoai.client.orchestration._appserver import AUTH_REQUIRED, OVERLOADED, RpcError, open_app_server
from ivoai.client.orchestration._catalogue import (
    Catalogue,
    assign_tiers,
    catalogue_from_dict,
    claude_catalogue,
    codex_catalogue,
    dumps,
    safe_version,
)
from ivoai.client.orchestration._errors import AppServerError
from ivoai.client.orchestration._pipes import json_lines, kill_group, spawn_piped
from ivoai.client.orchestration._profiles import VENDOR_CAPABILITIES, ProviderFacts
from ivoai.client.orchestration._quota import (
    AuthState,
    HardLimit,
    QuotaState,
    QuotaWindow,
    VendorQuota,
    codex_windows,
    merge_windows,
)
from ivoai.client.orchestration._scoring import Tier
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import atomic_write, read_private_file_or_none
from ivoai.common.limits import CATALOGUE_CACHE_MAX_BYTES, PROBE_TIMEOUT_SECONDS, QUOTA_PROBE_TIMEOUT_SECONDS
from ivoai.common.paths import XdgPaths, xdg_paths

CATALOGUE_DIR = "catalogues"

Tiers = Mapping[str, Tier] | None


class CatalogueCache:
    """Catalogues per (vendor, client version); tiers are assigned on read (config can change)."""

    def __init__(self, paths: XdgPaths | None = None) -> None:
        self.paths = paths or xdg_paths()
        # The catalogue directory is its own private root (0700): like the ArtifactStore, it does not
        # depend on the mode of `$XDG_CACHE_HOME/ivoai`, which other writers may have created 0755.
        self.dir = self.paths.cache / CATALOGUE_DIR
        self.root = self.dir

    def _path(self, vendor: str, version: str) -> Path:
        return self.dir / f"{vendor}-{safe_version(version)}.json"

    def get(self, vendor: str, version: str, tiers: Mapping[str, Tier] | None = None) -> Catalogue | None:
        """The cached catalogue of exactly this client version, or None."""
        try:
            raw = read_private_file_or_none(self.root, self._path(vendor, version), CATALOGUE_CACHE_MAX_BYTES)
        except (IvoaiError, OSError, ValueError):
            return None
        return self._parse(raw, tiers)

    def latest(self, vendor: str, tiers: Mapping[str, Tier] | None = None) -> Catalogue | None:
        """The most recently fetched cached catalogue of a vendor (offline `plan --check`)."""
        try:
            names = sorted(p.name for p in self.dir.iterdir() if p.name.startswith(f"{vendor}-"))
        except OSError:
            return None
        found = []
        for name in names:
            try:
                raw = read_private_file_or_none(self.root, self.dir / name, CATALOGUE_CACHE_MAX_BYTES)
            except (IvoaiError, OSError):
                continue
            cat = self._parse(raw, tiers)
            if cat is not None and cat.vendor == vendor:
                found.append(cat)
        return max(found, key=lambda c: c.fetched_at) if found else None

    @staticmethod
    def _parse(raw: bytes | None, tiers: Mapping[str, Tier] | None) -> Catalogue | None:
        if raw is None:
            return None
        try:
            doc = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        cat = catalogue_from_dict(doc) if isinstance(doc, dict) else None
        return assign_tiers(cat, tiers) if cat is not None else None

    def put(self, catalogue: Catalogue) -> None:
        """Store a catalogue (atomic, 0600)."""
        atomic_write(self.root, self._path(catalogue.vendor, catalogue.client_version), dumps(catalogue))


@dataclass(frozen=True)
class VendorProbe:
    """What one probe of a vendor's client found."""

    facts: ProviderFacts
    quota: VendorQuota | None  # None: this probe does not read quota (Claude)


def _account_auth(result: Any) -> AuthState:
    if not isinstance(result, dict):
        return "unknown"
    if isinstance(result.get("account"), dict):
        return "authenticated"
    if result.get("account") is None and result.get("requiresOpenaiAuth") is True:
        return "unauthenticated"
    return "unknown"


def probe_vendor(
    vendor: str,
    env: Mapping[str, str],
    cache: CatalogueCache,
    tiers: Tiers = None,
    *,
    now: float | None = None,
) -> VendorProbe:
    """Version, login, quota (Codex only) and catalogue (cached per version) of the real `vendor` client."""
    now = time.time() if now is None else now
    found = discover(vendor, env)
    if found is None:
        return VendorProbe(ProviderFacts(vendor, False, note=f"{vendor} is not installed"), None)
    return (_probe_codex if vendor == "codex" else _probe_claude)(found[0], env, cache, tiers, now)


def _probe_codex(
    codex: str, env: Mapping[str, str], cache: CatalogueCache, tiers: Tiers, now: float
) -> VendorProbe:
    """Talk to the real `codex app-server`: version, login, quota, catalogue."""
    try:
        with open_app_server(codex, env) as session:
            version = session.version
            auth = _account_auth(session.request("account/read", {}))
            windows: list[QuotaWindow] = []
            hard: HardLimit | None = None
            plan_type: str | None = None
            state: QuotaState = "unknown"
            error: str | None = None
            try:
                limits = session.request("account/rateLimits/read")
                if isinstance(limits, dict):
                    windows, hard, plan_type = codex_windows(limits, now)
                    state = "known" if windows else "not_exposed"
            except RpcError as exc:
                if exc.code == AUTH_REQUIRED:
                    auth = "unauthenticated"
                    state = "unknown"
                else:
                    state, error = "error", f"rate limits read failed ({exc.code}"
                    error += ": overloaded, retry later)" if exc.code == OVERLOADED else ")"
            for note in session.notifications:
                if note.get("method") == "account/rateLimits/updated" and isinstance(
                    note.get("params"), dict
                ):
                    update, _, _ = codex_windows(note["params"], now)
                    windows = list(merge_windows(windows, update))
            catalogue = None
            if version:
                catalogue = _cached_catalogue(
                    cache,
                    "codex",
                    version,
                    tiers,
                    lambda: codex_catalogue(
                        session.request("model/list", {"includeHidden": True}) or {}, version, now
                    ),
                )
    except (AppServerError, RpcError) as exc:
        quota = VendorQuota("codex", state="error", error=str(exc)[:240], observed_at=None)
        return VendorProbe(ProviderFacts("codex", False, note=str(exc)[:240]), quota)
    quota = VendorQuota(
        "codex",
        auth=auth,
        state=state,
        windows=tuple(windows),
        hard_limit=hard,
        observed_at=now,
        plan_type=plan_type,
        error=error,
    )
    facts = ProviderFacts("codex", True, auth, version, catalogue, VENDOR_CAPABILITIES["codex"])
    return VendorProbe(facts, quota)


def _cached_catalogue(
    cache: CatalogueCache,
    vendor: str,
    version: str,
    tiers: Mapping[str, Tier] | None,
    fetch: Callable[[], Catalogue],
) -> Catalogue:
    """The catalogue of `vendor` at `version`: cached, else fetched, cached (without tiers) and tiered."""
    catalogue = cache.get(vendor, version, tiers)
    if catalogue is None:
        catalogue = fetch()
        # A cache we cannot write costs one more catalogue request next time, nothing else.
        with contextlib.suppress(IvoaiError, OSError, ValueError):
            cache.put(catalogue)
        catalogue = assign_tiers(catalogue, tiers)
    return catalogue


def _run(
    argv: list[str], env: Mapping[str, str], timeout: float = PROBE_TIMEOUT_SECONDS
) -> tuple[int | None, str]:
    try:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            env=probe_env(env),
            check=False,
        )
    except (subprocess.TimeoutExpired, OSError):
        return None, ""
    return proc.returncode, proc.stdout[:65536].decode("utf-8", "replace")


def claude_auth(claude: str, env: Mapping[str, str]) -> AuthState:
    """`claude auth status`: its JSON `loggedIn` boolean decides; anything else is unknown."""
    code, out = _run([claude, "auth", "status"], env)
    try:
        doc = json.loads(out)
    except json.JSONDecodeError:
        return "unknown"
    if code is not None and isinstance(doc, dict) and isinstance(doc.get("loggedIn"), bool):
        return "authenticated" if doc["loggedIn"] else "unauthenticated"
    return "unknown"


def claude_initialize(
    claude: str, env: Mapping[str, str], timeout: float = QUOTA_PROBE_TIMEOUT_SECONDS
) -> dict[str, Any]:
    """The `initialize` control response of `claude -p --input-format stream-json` (no prompt is sent).

    Raises:
        AppServerError: no control response before the deadline.
    """
    argv = [claude, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    try:
        proc = spawn_piped(argv, env)
    except OSError as exc:
        raise AppServerError(f"could not start claude ({exc.strerror or exc})") from None
    request = {"type": "control_request", "request_id": "ivoai_init", "request": {"subtype": "initialize"}}
    deadline = time.monotonic() + timeout
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        for doc in json_lines(proc.stdout, deadline, max_pending=4 * 1024 * 1024):
            resp = doc.get("response") if isinstance(doc, dict) else None
            if (
                doc.get("type") == "control_response"
                and isinstance(resp, dict)
                and resp.get("request_id") == "ivoai_init"
                and isinstance(resp.get("response"), dict)
            ):
                return dict(resp["response"])
        raise AppServerError("claude did not answer the initialize control request")
    finally:
        kill_group(proc)


def _probe_claude(
    claude: str, env: Mapping[str, str], cache: CatalogueCache, tiers: Tiers, now: float
) -> VendorProbe:
    """`claude --version`, `claude auth status` and the catalogue of the real `claude`."""
    code, out = _run([claude, *EXECUTORS["claude"].version_args], env)
    version = out.split(" ", 1)[0].strip() if code == 0 and out[:1].isdigit() else None
    if version is None:
        return VendorProbe(ProviderFacts("claude", False, note="`claude --version` did not answer"), None)
    auth = claude_auth(claude, env)

    def fetch() -> Catalogue:
        return claude_catalogue(claude_initialize(claude, env), version, now)

    try:
        catalogue = _cached_catalogue(cache, "claude", version, tiers, fetch)
    except AppServerError as exc:
        caps = VENDOR_CAPABILITIES["claude"]
        return VendorProbe(ProviderFacts("claude", True, auth, version, None, caps, note=str(exc)), None)
    return VendorProbe(
        ProviderFacts("claude", True, auth, version, catalogue, VENDOR_CAPABILITIES["claude"]), None
    )


def offline_providers(cache: CatalogueCache, tiers: Mapping[str, Tier] | None = None) -> list[ProviderFacts]:
    """Providers from cached catalogues only (no client started): login and version unknown."""
    out = []
    for vendor in ("codex", "claude"):
        cat = cache.latest(vendor, tiers)
        note = "" if cat is not None else f"no cached {vendor} catalogue (run `ivoai quota --refresh` once)"
        caps = VENDOR_CAPABILITIES[vendor] if cat is not None else frozenset()
        version = cat.client_version if cat is not None else None
        out.append(ProviderFacts(vendor, cat is not None, "unknown", version, cat, caps, note))
    return out
