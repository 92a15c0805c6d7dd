"""What doctor and status say about managed components: pin, installed version, which executable a
session uses (managed pin or PATH) and whether the managed launcher is intact. No probes here: the
launcher's own doctor rows run the clients; these rows come from components.json and file digests.
"""

from __future__ import annotations

import os
from typing import Any

from ivoai.client.agents.executors import discover
from ivoai.client.components.errors import ComponentError
from ivoai.client.components.launchers import installed_digest
from ivoai.client.components.manifest import load_manifest, resolve
from ivoai.client.components.state import read_state
from ivoai.common.errors import IvoaiError
from ivoai.common.paths import XdgPaths, xdg_paths
from ivoai.core import ComponentStatus, Fact, Health, HealthState, Provenance, Source

KIND = "managed_component"


def executable_origins(paths: XdgPaths | None = None) -> dict[str, Any]:
    """For `status`: which codex/claude/headroom a session would run, and the managed pin if any."""
    paths = paths or xdg_paths()
    try:
        state = read_state(paths)
    except IvoaiError:
        state = {}
    out: dict[str, Any] = {}
    for name in ("codex", "claude", "headroom", "caveman-proxy"):
        found = discover(name)
        owner = "caveman" if name == "caveman-proxy" else name
        entry = state.get(owner)
        out[name] = {
            "origin": found[1] if found else "missing",
            "path": found[0] if found else None,
            "managed_version": entry.version if entry else None,
        }
    return out


def component_statuses(paths: XdgPaths) -> list[ComponentStatus]:
    """Doctor rows (kind `managed_component`), one per manifest component."""
    try:
        manifest = load_manifest()
        state = read_state(paths)
    except (ComponentError, IvoaiError) as exc:
        return [ComponentStatus("components", KIND, "ComponentManager", reason=f"cannot read: {exc.message}")]
    rows: list[ComponentStatus] = []
    for name, component in manifest.components.items():
        entry = state.get(name)
        try:
            pin = resolve(component)
        except IvoaiError as exc:
            rows.append(
                ComponentStatus(name, KIND, "ComponentManager", installed=Fact.NO, reason=exc.message)
            )
            continue
        if entry is None:
            path_hits = [p for lc in pin.launchers if (p := _on_path(lc.name, paths))]
            reason = "not installed by ivoai" + (f"; using {path_hits[0]} from PATH" if path_hits else "")
            rows.append(
                ComponentStatus(
                    name,
                    KIND,
                    "ComponentManager",
                    installed=Fact.NO,
                    active=Fact.NO,
                    reason=reason,
                    provenance=Provenance(Source.MANIFEST, detail=f"pin {pin.version}", version=pin.version),
                )
            )
            continue
        intact = all(installed_digest(paths, lc.name) == entry.launchers.get(lc.name) for lc in pin.launchers)
        current = entry.digest == pin.digest
        if not intact:
            health = Health(
                HealthState.DEGRADED, "a managed launcher was changed or removed: run `ivoai setup`"
            )
        elif not current:
            health = Health(HealthState.DEGRADED, f"pin {pin.version} available: run `ivoai update`")
        else:
            health = Health(HealthState.HEALTHY, "managed pin installed; launcher intact")
        node = f"; node {entry.node}" if entry.node else ""
        rows.append(
            ComponentStatus(
                name,
                KIND,
                "ComponentManager",
                installed=Fact.YES,
                available=Fact.YES if intact else Fact.NO,
                health=health,
                version=entry.version,
                provenance=Provenance(
                    Source.MANIFEST, detail=f"managed {entry.generation}{node}", version=entry.version
                ),
                active=Fact.YES if intact else Fact.NO,
                reason=f"sessions use the managed pin {entry.version} (preferred over PATH)"
                if intact
                else health.reason,
            )
        )
    return rows


def _on_path(binary: str, paths: XdgPaths) -> str | None:
    managed = os.path.abspath(paths.data / "bin")
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry) and os.path.abspath(entry) != managed:
            candidate = os.path.join(entry, binary)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    return None
