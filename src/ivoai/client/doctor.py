"""`ivoai doctor` and `ivoai status`: read-only facts about ivoai's files, config, identity and components.

Nothing here creates or changes a file. Missing evidence is reported as `not_probed` or `unknown`,
never guessed. Values (secrets, config strings) are never reported; only counts, modes and names.

Component rows come from provider functions named in PROVIDERS (`module:function`, imported
lazily; a module that does not exist yet is skipped and reported as `not_available`). A provider
takes the `XdgPaths` (or nothing) and returns an iterable of `ivoai.core.ComponentStatus`.
"""

from __future__ import annotations

import importlib
import inspect
import os
import platform
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ivoai import __version__
from ivoai.client.config.keys import KNOWN_KEYS
from ivoai.common.errors import IvoaiError, UnsafePathError
from ivoai.common.fsio import check_stat, describe_mode
from ivoai.common.limits import DOCTOR_DIR_LISTING_MAX_ENTRIES
from ivoai.common.paths import XdgPaths, xdg_paths
from ivoai.common.redact import redact
from ivoai.core import ComponentMatrix, ComponentStatus

DOCTOR_SCHEMA_VERSION = 1

# Add one line per subsystem that can describe its components.
PROVIDERS: tuple[str, ...] = (
    "ivoai.client.agents.probes:component_statuses",
    "ivoai.client.skills.service:component_statuses",  # issue 20: the skill control plane
    "ivoai.client.components.status:component_statuses",  # managed pins (issue 17)
    "ivoai.client.orchestration._daemons:component_statuses",  # issue 16: stray Ruflo daemons
)

# Components doctor always lists; a row stays `not_probed` until some provider reports on it.
EXPECTED_COMPONENTS: tuple[tuple[str, str], ...] = (
    ("codex", "executor"),
    ("claude", "executor"),
    ("opencode", "executor"),
    ("caveman", "compression_provider"),
    ("headroom", "compression_provider"),
)

# google-re2 and hyperscan: the artifact store's credential scan falls back to slower engines
# without them, so doctor shows whether they are there.
DEPENDENCIES = ("typer", "rich", "tomlkit", "pydantic", "httpx2", "h11", "mcp", "google-re2", "hyperscan")


@dataclass(frozen=True)
class ProviderReport:
    """What happened when doctor asked one provider for component rows."""

    provider: str
    status: str  # ok | not_available | error
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON shape."""
        return {"provider": self.provider, "status": self.status, "detail": self.detail}


def _load_provider(spec: str) -> Callable[..., Iterable[ComponentStatus]] | None:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Only "this provider is not part of the build yet" is skipped; a broken import inside it is an error.
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            return None
        raise
    fn: Callable[..., Iterable[ComponentStatus]] = getattr(module, attr)
    return fn


def _call_provider(fn: Callable[..., Iterable[ComponentStatus]], paths: XdgPaths) -> list[ComponentStatus]:
    takes_paths = len(inspect.signature(fn).parameters) > 0
    rows = list(fn(paths) if takes_paths else fn())
    for row in rows:
        if not isinstance(row, ComponentStatus):
            raise TypeError(f"provider returned {type(row).__name__}, not ComponentStatus")
    return rows


def collect_components(
    paths: XdgPaths, providers: Iterable[str] | None = None
) -> tuple[ComponentMatrix, list[ProviderReport]]:
    """Ask every provider (default: PROVIDERS) for rows; unreported expected components stay `not_probed`."""
    providers = PROVIDERS if providers is None else providers
    rows = [
        ComponentStatus(component=name, kind=kind, reason="no probe for this component in this build")
        for name, kind in EXPECTED_COMPONENTS
    ]
    reports: list[ProviderReport] = []
    for spec in providers:
        try:
            fn = _load_provider(spec)
            if fn is None:
                reports.append(ProviderReport(spec, "not_available", "module not present in this build"))
                continue
            rows.extend(_call_provider(fn, paths))
            reports.append(ProviderReport(spec, "ok"))
        except Exception as exc:  # noqa: BLE001 - a broken provider must not break doctor; it is reported
            reports.append(ProviderReport(spec, "error", redact(f"{type(exc).__name__}: {exc}")[:240]))
    return ComponentMatrix(rows), reports


@dataclass(frozen=True)
class PathReport:
    """One ivoai path: facts from lstat plus whether it passes ivoai's safety checks."""

    name: str
    path: Path
    expect_dir: bool
    facts: dict[str, object] = field(default_factory=dict)
    status: str = "missing"  # ok | missing | unsafe
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON shape (mode/owner are null when the path does not exist)."""
        return {
            "name": self.name,
            "path": str(self.path),
            "expected": "dir 0700" if self.expect_dir else "file 0600",
            "exists": bool(self.facts.get("exists")),
            "kind": self.facts.get("kind"),
            "mode": self.facts.get("mode"),
            "owned_by_you": self.facts.get("owned_by_you"),
            "status": self.status,
            "problem": self.problem,
        }


def describe_path(name: str, path: Path, *, expect_dir: bool) -> PathReport:
    """lstat `path` and run the same checks ivoai applies before using it."""
    facts = describe_mode(path)
    if not facts.get("exists"):
        return PathReport(name, path, expect_dir, facts, "missing")
    try:
        check_stat(os.lstat(path), path, private=True, expect_dir=expect_dir)
    except UnsafePathError as exc:
        return PathReport(name, path, expect_dir, facts, "unsafe", exc.message)
    return PathReport(name, path, expect_dir, facts, "ok")


def describe_paths(paths: XdgPaths) -> list[PathReport]:
    """Every ivoai root, every file the foundation knows, and whatever else sits directly in a root."""
    known: list[tuple[str, Path, bool]] = [
        ("config", paths.config, True),
        ("config_file", paths.config_file, False),
        ("secrets_file", paths.secrets_file, False),
        ("data", paths.data, True),
        ("server_data", paths.server_data_dir, True),
        ("state", paths.state, True),
        ("ownership_manifest", paths.ownership_manifest, False),
        ("sessions", paths.sessions_dir, True),
        ("cache", paths.cache, True),
        ("working_context", paths.working_context_dir, True),
    ]
    seen = {p for _, p, _ in known}
    reports = [describe_path(name, path, expect_dir=is_dir) for name, path, is_dir in known]
    for root_name, root in paths.roots().items():
        if os.path.islink(root):  # reported as unsafe above; never list what it points to
            continue
        try:
            entries = sorted(os.listdir(root))[:DOCTOR_DIR_LISTING_MAX_ENTRIES]
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            child = root / entry
            if child in seen:
                continue
            is_dir = os.path.isdir(child) and not os.path.islink(child)
            reports.append(describe_path(f"{root_name}/{entry}", child, expect_dir=is_dir))
    return reports


def versions() -> dict[str, str]:
    """ivoai, Python, platform and dependency versions (`not installed` when absent)."""
    import importlib.metadata  # not at module level: `status` must not pay for it

    out = {"ivoai": __version__, "python": platform.python_version(), "platform": sys.platform}
    for dist in DEPENDENCIES:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _config_summary(paths: XdgPaths) -> dict[str, Any]:
    """config.toml read the way a launch reads it (stdlib TOML, safety, schema and value checks)."""
    from ivoai.client.config.fast import read_config_fast

    try:
        raw = read_config_fast(paths)
    except IvoaiError as exc:
        return {"status": "error", "error": exc.message, "code": exc.code, "values": {}}
    values = {}
    for key, spec in sorted(KNOWN_KEYS.items()):
        section = raw.get(spec.section) or {}
        if spec.name in section:
            values[key] = {"value": section[spec.name], "origin": "file"}
        else:
            values[key] = {"value": spec.default, "origin": "default"}
    source = (raw.get("compression") or {}).get("source")
    values["compression.source"] = {"value": source, "origin": "file" if source else "unset"}
    exists = paths.config_file.exists()
    return {"status": "ok" if exists else "missing", "error": None, "code": None, "values": values}


def _secrets_summary(paths: XdgPaths) -> dict[str, Any]:
    from ivoai.client.config.secrets import SecretsStore

    try:
        count = len(SecretsStore(paths).ids())
    except IvoaiError as exc:
        return {"status": "error", "error": exc.message, "count": None}
    return {"status": "ok" if paths.secrets_file.exists() else "missing", "error": None, "count": count}


def _ownership_summary(paths: XdgPaths) -> dict[str, Any]:
    from ivoai.client.config.ownership import OwnershipManifest

    try:
        entries = OwnershipManifest(paths).entries()
    except IvoaiError as exc:
        return {"status": "error", "error": exc.message, "entries": []}
    rows = [{"component": e.component, "path": e.path, "ownership": e.ownership.value} for e in entries]
    exists = paths.ownership_manifest.exists()
    return {"status": "ok" if exists else "missing", "error": None, "entries": rows}


def _identity_summary(cwd: Path | None) -> dict[str, Any]:
    from ivoai.client.identity import resolve_identity

    try:
        return {"error": None, **resolve_identity(cwd).as_dict()}
    except IvoaiError as exc:
        return {"error": exc.message, "identity": None}


@dataclass(frozen=True)
class LocalState:
    """Every fact about ivoai's own files and identity; the one verdict `status` and `doctor` share."""

    paths: list[PathReport]
    config: dict[str, Any]
    secrets: dict[str, Any]
    ownership: dict[str, Any]
    identity: dict[str, Any]

    @property
    def problems(self) -> list[str]:
        """One line per failed check (unsafe path, unreadable or invalid state file, identity)."""
        out = [f"{p.path}: {p.problem}" for p in self.paths if p.status == "unsafe"]
        for name, section in (
            ("config", self.config),
            ("secrets", self.secrets),
            ("ownership", self.ownership),
        ):
            if section.get("status") == "error":
                out.append(f"{name}: {section['error']}")
        if self.identity.get("error"):
            out.append(f"identity: {self.identity['error']}")
        return [redact(line) for line in out]


def check_local_state(paths: XdgPaths, cwd: Path | None = None) -> LocalState:
    """Read-only checks of every ivoai path and state file (cheap: lstat, small reads, no probes)."""
    return LocalState(
        paths=describe_paths(paths),
        config=_config_summary(paths),
        secrets=_secrets_summary(paths),
        ownership=_ownership_summary(paths),
        identity=_identity_summary(cwd),
    )


@dataclass(frozen=True)
class DoctorReport:
    """Everything doctor found; `ok` is False when a local check or a component provider failed."""

    versions: dict[str, str]
    local: LocalState
    components: ComponentMatrix
    providers: list[ProviderReport]
    servers: list[dict[str, Any]] = field(default_factory=list)  # enrolled servers (issue 18, serverprobe)

    @property
    def problems(self) -> list[str]:
        """The local state's problems (the same as `status`'s), then broken providers and servers."""
        out = list(self.local.problems)
        out.extend(
            redact(f"doctor provider {r.provider}: {r.detail}") for r in self.providers if r.status == "error"
        )
        out.extend(redact(str(s["problem"])) for s in self.servers if s.get("problem"))
        return out

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """The stable `doctor --json` document."""
        return {
            "schema": DOCTOR_SCHEMA_VERSION,
            "ok": self.ok,
            "problems": self.problems,
            "versions": self.versions,
            "identity": self.local.identity,
            "paths": [p.to_dict() for p in self.local.paths],
            "config": self.local.config,
            "secrets": self.local.secrets,
            "ownership": self.local.ownership,
            "components": self.components.to_list(),
            "providers": [r.to_dict() for r in self.providers],
            "servers": self.servers,
        }


def _servers_summary(paths: XdgPaths, refresh: bool) -> list[dict[str, Any]]:
    from ivoai.client.connections.serverprobe import probe_servers

    try:
        return [dict(h.to_dict(), problem=h.problem()) for h in probe_servers(paths, use_cache=not refresh)]
    except IvoaiError as exc:
        return [{"error": exc.message, "problem": f"servers: {exc.message}"}]


def run_doctor(
    paths: XdgPaths | None = None,
    *,
    cwd: Path | None = None,
    providers: Iterable[str] | None = None,
    refresh: bool = False,
) -> DoctorReport:
    """Collect every doctor fact (read-only; server probes are cached a minute unless `refresh`)."""
    paths = paths or xdg_paths()
    matrix, reports = collect_components(paths, providers)
    return DoctorReport(
        versions=versions(),
        local=check_local_state(paths, cwd),
        components=matrix,
        providers=reports,
        servers=_servers_summary(paths, refresh),
    )


def collect_status(paths: XdgPaths | None = None, *, cwd: Path | None = None) -> dict[str, Any]:
    """The cheap `status --json` document: identity, roots, requested compression, counts (no probes).

    Its verdict (`ok`, `problems`) is doctor's local verdict, from the same checks: a state `doctor`
    calls unsafe is never `ok` here. Only doctor's component probes are left out.
    """
    paths = paths or xdg_paths()
    local = check_local_state(paths, cwd)
    config: dict[str, Any] = {"status": local.config["status"]}
    if local.config["status"] == "error":
        config.update(compression_provider=None, compression_source=None)
    else:
        provider = local.config["values"]["compression.provider"]
        source = local.config["values"]["compression.source"]["value"]
        config["compression_provider"] = provider["value"]
        if provider["origin"] == "default":
            config["compression_source"] = "default"
        else:
            # A legacy file may carry a provider without a source; the launcher records the migration.
            config["compression_source"] = source if isinstance(source, str) else "unrecorded"
    by_path = {p.path: p for p in local.paths}
    return {
        "schema": DOCTOR_SCHEMA_VERSION,
        "version": __version__,
        "ok": not local.problems,
        "problems": local.problems,
        "identity": local.identity.get("identity"),
        "identity_kind": local.identity.get("kind"),
        "paths": {
            name: {"path": str(p), "exists": by_path[p].status != "missing", "status": by_path[p].status}
            for name, p in paths.roots().items()
        },
        "config": config,
        "secrets": {"count": local.secrets.get("count")},
        "ownership": {"count": len(local.ownership.get("entries", []))},
        "executables": _executables(paths),
    }


def _executables(paths: XdgPaths) -> dict[str, Any]:
    """Which codex/claude/headroom/caveman-proxy a session would run: managed pin or PATH (issue 17)."""
    from ivoai.client.components.status import executable_origins

    return executable_origins(paths)
