"""`ivoai setup`: install or repair pinned components, idempotently, below ivoai's XDG data root only.

Per component:

* installed at the manifest's pin and intact (generation complete, launchers byte-identical to what
  setup wrote) -> `unchanged` (no probe, no subprocess: the repair path is a few stats and hashes);
* installed at the pin but damaged (a launcher edited or deleted, a required file missing) ->
  reinstalled or rewritten, probed, `repaired`;
* not installed -> staged, probed, promoted, `installed`;
* installed at another pin (this ivoai ships a newer manifest) -> `update_available`: setup never
  moves a pin; `ivoai update` does, transactionally;
* `--skip-existing` and the user already has the executable on PATH -> `skipped` (recorded as
  `pre_existing` and used by the launcher).

A tool the user already had on PATH is recorded `pre_existing` and never replaced or removed; the
launcher prefers the managed pin when one exists. One failing component does not stop the others;
the report says which failed and why.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any

from ivoai.client.components import engine
from ivoai.client.components.installers import InstallContext
from ivoai.client.components.journal import recover
from ivoai.client.components.manifest import Manifest, Pin, resolve
from ivoai.client.components.state import Installed, bin_dir, components_lock, now, read_state, write_state
from ivoai.common.errors import IvoaiError

SETUP_SCHEMA = 1


@dataclass
class ComponentResult:
    """What setup did with one component."""

    name: str
    version: str
    action: str  # installed | repaired | unchanged | update_available | skipped | failed
    launchers: list[str] = field(default_factory=list)
    pre_existing: list[str] = field(default_factory=list)
    node: str | None = None
    node_source: str | None = None
    probe: str | None = None
    installed_version: str | None = None
    license: str = ""
    error: str | None = None
    error_code: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class SetupReport:
    """The outcome of one `ivoai setup`."""

    results: list[ComponentResult]
    recovered: dict[str, Any] | None = None
    test_manifest: bool = False

    @property
    def ok(self) -> bool:
        return all(r.action != "failed" for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SETUP_SCHEMA,
            "ok": self.ok,
            "recovered": self.recovered,
            "test_manifest": self.test_manifest,
            "components": [r.to_dict() for r in self.results],
        }


def selected(manifest: Manifest, names: list[str] | None) -> list[str]:
    """The components to act on: the named ones (validated, deduplicated) or the manifest defaults."""
    if not names:
        return manifest.defaults()
    if "all" in names:
        return [n for n in manifest.components if n != "node"]
    out: list[str] = []
    for name in names:
        manifest.get(name)
        if name not in out:
            out.append(name)
    return out


def ensure(
    pin: Pin,
    ctx: InstallContext,
    manifest: Manifest,
    state: dict[str, Installed],
    node_cache: dict[str, object],
    *,
    skip_existing: bool = False,
) -> ComponentResult:
    """Install or repair one pin; update `state` in memory (the caller writes it)."""
    result = ComponentResult(pin.name, pin.version, "unchanged", license=pin.component.license)
    result.launchers = [str(bin_dir(ctx.paths) / lc.name) for lc in pin.launchers]
    existing = engine.pre_existing(pin, ctx)
    result.pre_existing = existing
    entry = state.get(pin.name)
    if entry is not None and entry.digest != pin.digest:
        result.action = "update_available"
        result.installed_version = entry.version
        return result
    if entry is None and skip_existing and existing:
        result.action = "skipped"
        result.warnings = engine.record_ownership_pre_existing(pin, ctx, existing)
        return result
    engine.remove_abandoned_staging(ctx, pin.name)
    install = engine.generation_dir(ctx, pin)
    complete = engine.is_complete(install, pin)
    if entry is not None and entry.node and os.access(entry.node, os.X_OK) and engine.needs_node(pin):
        # The repair path: the Node chosen at install time is still there; it is not re-probed.
        choice = engine.NodeChoice(entry.node, "recorded", "the Node recorded at install time")
    else:
        choice = engine.choose_node(pin, ctx, manifest, node_cache)
    result.node, result.node_source = choice.path, choice.source
    if choice.pin is not None:
        _record_node(choice.pin, ctx, state)
    node_unchanged = entry is None or entry.node == choice.path
    if entry is not None and complete and node_unchanged and engine.launchers_intact(pin, entry, ctx):
        result.warnings = engine.record_ownership(pin, ctx, existing)
        return result
    install = engine.stage(pin, ctx)
    contents = engine.launcher_contents(pin, install, choice.path)
    result.probe = engine.probe_staged(pin, install, contents, ctx)
    digests = engine.promote(pin, contents, ctx)
    state[pin.name] = Installed(
        version=pin.version,
        digest=pin.digest,
        generation=pin.generation,
        kind=pin.component.kind,
        installed_at=now() if entry is None else entry.installed_at,
        node=choice.path,
        launchers=digests,
    )
    result.action = "installed" if entry is None else "repaired"
    result.warnings = engine.record_ownership(pin, ctx, existing)
    return result


def _record_node(node: Pin, ctx: InstallContext, state: dict[str, Installed]) -> None:
    """ivoai's own Node was staged for a launcher: record it (no launcher of its own)."""
    entry = state.get(node.name)
    if entry is None or entry.digest != node.digest:
        state[node.name] = Installed(node.version, node.digest, node.generation, "npm", now())
        engine.record_ownership(node, ctx, [])


def run_setup(
    ctx: InstallContext, manifest: Manifest, names: list[str] | None = None, *, skip_existing: bool = False
) -> SetupReport:
    """Install or repair the named (or default) components; see the module docstring.

    Raises:
        UnknownComponentError: a name the manifest does not know (nothing was changed).
        LockTimeoutError: another setup/update/uninstall holds the components lock.
    """
    wanted = selected(manifest, names)
    results: list[ComponentResult] = []
    with components_lock(ctx.paths):
        recovered = recover(ctx)
        state = read_state(ctx.paths)
        read_before = copy.deepcopy(state)
        if not ctx.paths.state.joinpath("components.json").exists():
            write_state(ctx.paths, state)  # a first setup leaves an (empty) record even if all fail
        node_cache: dict[str, object] = {}
        for name in wanted:
            component = manifest.get(name)
            try:
                pin = resolve(component)
                result = ensure(pin, ctx, manifest, state, node_cache, skip_existing=skip_existing)
            except IvoaiError as exc:
                result = ComponentResult(
                    name,
                    component.version,
                    "failed",
                    license=component.license,
                    error=exc.message,
                    error_code=exc.code,
                )
            results.append(result)
            ctx.progress(f"{name}: {result.action}")
            if state != read_before:
                write_state(ctx.paths, state)
                read_before = copy.deepcopy(state)
    return SetupReport(results, recovered, manifest.test_override)
