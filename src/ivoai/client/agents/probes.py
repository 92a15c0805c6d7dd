"""Probes of the official clients and the compression providers, for `ivoai doctor`.

Installed, available and healthy are separate facts (seed 002, "Replaceable core contracts"):
installed = the executable exists (managed data root or PATH); available = its `--version`
answers; healthy = its auth-status probe says logged in (`codex login status`,
`claude auth status`). Missing evidence stays `unknown`/`not_probed`, never inferred from a name.
Probes run with structured argv, a timeout and a minimal environment (`childenv.probe_env`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from ivoai.client.agents.executors import EXECUTORS, ExecutorSpec, discover
from ivoai.client.compression._probe import ProbeResult, run_probe
from ivoai.common.limits import PROBE_TIMEOUT_SECONDS
from ivoai.common.paths import XdgPaths
from ivoai.core import ComponentStatus, Fact, Fallback, Health, HealthState, Provenance, Source, Support

_EXECUTOR_CAPABILITIES = {
    "session_start": Support.SUPPORTED,
    "bounded_cancellation": Support.SUPPORTED,
    "incremental_send": Support.NOT_EXPOSED,
    "structured_results": Support.NOT_EXPOSED,
    "diff_retrieval": Support.NOT_EXPOSED,
}
IMPLEMENTATIONS = {
    "codex": "CodexExecutor",
    "claude": "ClaudeExecutor",
    "opencode": "OpenCodeExecutor",
    "caveman": "CavemanCompressionProvider",
    "headroom": "HeadroomCompressionProvider",
    "direct": "DirectCompressionProvider",
}


def parse_version(spec: ExecutorSpec, text: str) -> str | None:
    """The version in a client's `--version` output (`codex-cli 0.171.0`, `2.1.197 (Claude Code)`)."""
    for token in text.replace("(", " ").split():
        if token[:1].isdigit() and "." in token:
            return token.strip(",")
    return None


def auth_state(spec: ExecutorSpec, probe: ProbeResult) -> tuple[HealthState, str]:
    """Health from the auth-status probe: logged in -> healthy, logged out -> degraded."""
    if probe.timed_out:
        return HealthState.UNKNOWN, "auth status probe timed out"
    if probe.failed_to_start or probe.code is None:
        return HealthState.UNKNOWN, "auth status probe could not run"
    if spec.name == "claude":
        try:
            doc = json.loads(probe.stdout)
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("loggedIn"), bool):
            if doc["loggedIn"]:
                return HealthState.HEALTHY, f"logged in ({doc.get('authMethod', 'unknown')})"
            return HealthState.DEGRADED, "not logged in: run `ivoai connect claude`"
        return HealthState.UNKNOWN, "unrecognised `claude auth status` output"
    if probe.code == 0:
        return HealthState.HEALTHY, "logged in"
    if "not logged in" in (probe.stdout + probe.stderr).lower():
        return HealthState.DEGRADED, "not logged in: run `ivoai connect chatgpt`"
    return HealthState.UNKNOWN, f"`codex login status` exited {probe.code}"


def executor_status(spec: ExecutorSpec, env: Mapping[str, str]) -> ComponentStatus:
    """One executor's row: installed, available (version), healthy (auth status)."""
    impl = IMPLEMENTATIONS[spec.name]
    found = discover(spec.binary, env)
    if found is None:
        return ComponentStatus(
            component=spec.name,
            kind="executor",
            implementation=impl,
            installed=Fact.NO,
            available=Fact.NO,
            health=Health(HealthState.NOT_PROBED, "not installed"),
            capabilities=_EXECUTOR_CAPABILITIES,
            active=Fact.NO,
            reason=f"{spec.binary} not found on PATH or in ivoai's managed data root",
        )
    path, where = found
    version_probe = run_probe([path, *spec.version_args], timeout=PROBE_TIMEOUT_SECONDS, env=env)
    version = parse_version(spec, version_probe.stdout) if version_probe.ok else None
    available = Fact.YES if version else Fact.NO if version_probe.code not in (None, 0) else Fact.UNKNOWN
    if spec.auth_args is None:
        health = Health(HealthState.UNKNOWN, "no auth-status command (direct-only executor)")
    else:
        state, reason = auth_state(
            spec, run_probe([path, *spec.auth_args], timeout=PROBE_TIMEOUT_SECONDS, env=env)
        )
        health = Health(state, reason)
    caps = dict(_EXECUTOR_CAPABILITIES)
    caps["process_local_mcp"] = Support.SUPPORTED if spec.mcp_style else Support.UNSUPPORTED
    return ComponentStatus(
        component=spec.name,
        kind="executor",
        implementation=impl,
        installed=Fact.YES,
        available=available,
        health=health,
        version=version,
        capabilities=caps,
        provenance=Provenance(
            Source.PROBE, detail=f"{where}: {' '.join([spec.binary, *spec.version_args])}", version=version
        ),
        active=Fact.YES if available is Fact.YES else Fact.NO,
        reason=f"official client from {'ivoai managed data root' if where == 'managed' else 'PATH'}",
    )


def _requested(paths: XdgPaths | None) -> tuple[str, str]:
    from ivoai.client.compression.settings import resolve_setting
    from ivoai.client.config.fast import read_config_fast

    setting = resolve_setting(read_config_fast(paths))
    return setting.provider, setting.source


def provider_statuses(env: Mapping[str, str], paths: XdgPaths | None = None) -> list[ComponentStatus]:
    """Rows for caveman, headroom and direct, and which one a new session would request/use."""
    from ivoai.client.compression import caveman, headroom
    from ivoai.client.compression.errors import PreflightError
    from ivoai.common.errors import IvoaiError

    try:
        requested, source = _requested(paths)
    except IvoaiError as exc:
        requested, source = "direct", f"config error: {exc.code}"
    rows: list[ComponentStatus] = []
    outcome: dict[str, str | None] = {}
    for name in ("caveman", "headroom"):
        installed = Fact.NOT_PROBED
        version: str | None = None
        digest: str | None = None
        try:
            if name == "caveman":
                cb = caveman.preflight(env)
                version, digest = cb.version, cb.sha256
            else:
                hb = headroom.preflight("codex", env)
                version = hb.version
            installed, available, failure = Fact.YES, Fact.YES, None
        except PreflightError as exc:
            failure = exc.code
            installed = Fact.NO if exc.code.endswith("not_installed") else Fact.YES
            available = Fact.NO
        outcome[name] = failure
        wanted = requested == name
        reason = (f"requested by compression.provider ({source})" if wanted else "not requested") + (
            f"; preflight failed: {failure}" if failure else "; preflight passed"
        )
        rows.append(
            ComponentStatus(
                component=name,
                kind="compression_provider",
                implementation=IMPLEMENTATIONS[name],
                installed=installed,
                available=available,
                health=Health(
                    HealthState.NOT_PROBED, "health is checked per session (proxy started on launch)"
                ),
                version=version,
                provenance=Provenance(Source.PROBE, detail="preflight", version=version, digest=digest),
                fallback=Fallback(name, "direct", failure) if wanted and failure else None,
                active=Fact.YES if wanted and failure is None else Fact.NO,
                reason=reason,
            )
        )
    direct_active = requested == "direct" or outcome.get(requested) is not None
    rows.append(
        ComponentStatus(
            component="direct",
            kind="compression_provider",
            implementation=IMPLEMENTATIONS["direct"],
            installed=Fact.YES,
            available=Fact.YES,
            health=Health(HealthState.HEALTHY, "the official client, unchanged"),
            provenance=Provenance(Source.BUILTIN),
            active=Fact.YES if direct_active else Fact.NO,
            reason="safety fallback; sessions with authoritative memory/context always run Direct",
        )
    )
    return rows


def component_statuses(paths: XdgPaths | None = None) -> list[ComponentStatus]:
    """The launcher's rows of doctor's component matrix (executors, then compression providers)."""
    env = dict(os.environ)
    with ThreadPoolExecutor(max_workers=4) as pool:
        execs = [pool.submit(executor_status, spec, env) for spec in EXECUTORS.values()]
        providers = pool.submit(provider_statuses, env, paths)
        return [f.result() for f in execs] + providers.result()
