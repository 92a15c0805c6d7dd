"""The steps setup and update share: stage a pin, choose its Node, render, probe and promote launchers.

Install layout below `$XDG_DATA_HOME/ivoai`::

    bin/NAME                               managed launchers (what the agent launcher finds first)
    components/NAME/<version>-<digest12>/  one immutable install per pin ("generation")
    components/NAME/.staging-<random>/     an install in progress (removed if it fails or is abandoned)

A generation is complete when its `.ivoai-install.json` marker records the pin digest and every
`required` file exists; the marker is written last, then the directory is renamed into place.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from ivoai.client.components.errors import InstallerError
from ivoai.client.components.installers import STAGERS, InstallContext, version_tuple
from ivoai.client.components.launchers import installed_digest, probe, render, write_launcher
from ivoai.client.components.manifest import Manifest, Pin, resolve
from ivoai.client.components.state import Installed, bin_dir, components_dir, now
from ivoai.client.config.ownership import Ownership, OwnershipManifest
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import ensure_private_dir

MARKER = ".ivoai-install.json"
STAGING_PREFIX = ".staging-"
PROBE_HOME_PREFIX = ".probe-"


def generation_dir(ctx: InstallContext, pin: Pin) -> Path:
    return components_dir(ctx.paths) / pin.name / pin.generation


def is_complete(path: Path, pin: Pin) -> bool:
    """The marker matches the pin and every required file is still there."""
    try:
        marker = json.loads((path / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(marker, dict) or marker.get("digest") != pin.digest:
        return False
    return not missing_required(path, pin)


def missing_required(path: Path, pin: Pin) -> list[str]:
    """The `required` entries absent below `path` (an entry with `*` needs at least one match)."""
    return [rel for rel in pin.required if not (any(path.glob(rel)) if "*" in rel else (path / rel).exists())]


def remove_abandoned_staging(ctx: InstallContext, name: str) -> None:
    """Staging directories a killed setup/update left behind (caller holds the components lock)."""
    base = components_dir(ctx.paths) / name
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(base):
            if entry.name.startswith((STAGING_PREFIX, PROBE_HOME_PREFIX)):
                shutil.rmtree(entry.path, ignore_errors=True)


def stage(pin: Pin, ctx: InstallContext) -> Path:
    """Install `pin` into its generation directory (reused when already complete).

    Raises:
        ComponentError subclasses: download, integrity, archive, installer failures (nothing promoted).
    """
    final = generation_dir(ctx, pin)
    if is_complete(final, pin):
        return final
    base = ensure_private_dir(ctx.paths.data, components_dir(ctx.paths) / pin.name)
    if final.exists():
        shutil.rmtree(final)  # an incomplete or tampered generation of the same pin
    # A Python venv is not relocatable (its scripts name its interpreter by absolute path), so pip
    # components are built in place; the marker, written last, is what makes a generation complete.
    in_place = pin.component.kind == "pip"
    staging = final if in_place else base / f"{STAGING_PREFIX}{secrets.token_hex(6)}"
    staging.mkdir(mode=0o700)
    try:
        STAGERS[pin.component.kind](pin, ctx, staging)
        missing = missing_required(staging, pin)
        if missing:
            raise InstallerError(f"{pin.name}: the install lacks {', '.join(missing)}")
        if not in_place:
            os.rename(staging, final)
        marker = {"name": pin.name, "version": pin.version, "digest": pin.digest, "installed_at": now()}
        (final / MARKER).write_text(json.dumps(marker, sort_keys=True) + "\n", encoding="utf-8")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(final, ignore_errors=True)
        raise
    return final


def system_node(ctx: InstallContext) -> tuple[str, tuple[int, int, int]] | None:
    """The system Node (PATH, outside ivoai's bin) and its version, or None."""
    path = ctx.which("node")
    if path is None:
        return None
    import subprocess

    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, timeout=15, env={"PATH": "/usr/bin:/bin"}, check=False
        ).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired):
        return None
    version = version_tuple(out)
    return (path, version) if version else None


@dataclass
class NodeChoice:
    """Which Node runs an npm component's launcher, and why."""

    path: str | None
    source: str  # system | managed | none
    reason: str
    pin: Pin | None = None  # ivoai's Node, when it is the one chosen


def needs_node(pin: Pin) -> bool:
    return any(lc.kind == "node_script" for lc in pin.launchers)


def choose_node(pin: Pin, ctx: InstallContext, manifest: Manifest, cache: dict[str, object]) -> NodeChoice:
    """The system Node when it satisfies the pin's `node_min`; otherwise ivoai's pinned Node (staged)."""
    if not needs_node(pin):
        return NodeChoice(None, "none", "the launcher does not run on Node")
    want = version_tuple(pin.component.node_min or "0.0.0") or (0, 0, 0)
    if "system" not in cache:
        cache["system"] = system_node(ctx)
    found = cache["system"]
    if isinstance(found, tuple) and found[1] >= want:
        return NodeChoice(
            found[0], "system", f"system Node {'.'.join(map(str, found[1]))} >= {pin.component.node_min}"
        )
    node_pin = resolve(manifest.get("node"), pin.target)
    node_dir = stage(node_pin, ctx)
    assert node_pin.provides_node is not None
    path = str(node_dir / node_pin.provides_node)
    why = "no system Node" if found is None else f"system Node is older than {pin.component.node_min}"
    return NodeChoice(path, "managed", f"{why}; ivoai's Node {node_pin.version}", node_pin)


def launcher_contents(pin: Pin, install: Path, node: str | None) -> dict[str, bytes | Path]:
    return {lc.name: render(pin, lc, install, node) for lc in pin.launchers}


def probe_staged(pin: Pin, install: Path, contents: dict[str, bytes | Path], ctx: InstallContext) -> str:
    """Probe the component before its launchers are promoted (a private copy of the first launcher).

    Raises:
        ProbeError: the staged component does not answer as its pin says.
    """
    if not contents:
        return "no launcher"
    name, content = next(iter(contents.items()))
    base = components_dir(ctx.paths) / pin.name
    home = base / f"{PROBE_HOME_PREFIX}{secrets.token_hex(6)}"
    home.mkdir(mode=0o700)
    try:
        if isinstance(content, bytes):
            exe = home / name
            exe.write_bytes(content)
            exe.chmod(0o700)
        else:
            exe = content
        return probe(pin, exe, ctx.env, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def probe_installed(pin: Pin, ctx: InstallContext) -> str:
    """Probe through the promoted launcher (what a session will run)."""
    if not pin.launchers:
        return "no launcher"
    base = ensure_private_dir(ctx.paths.data, components_dir(ctx.paths) / pin.name)
    home = base / f"{PROBE_HOME_PREFIX}{secrets.token_hex(6)}"
    home.mkdir(mode=0o700)
    try:
        return probe(pin, bin_dir(ctx.paths) / pin.launchers[0].name, ctx.env, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def promote(pin: Pin, contents: dict[str, bytes | Path], ctx: InstallContext) -> dict[str, str]:
    """Atomically replace every launcher of `pin`; return their SHA-256 digests."""
    return {name: write_launcher(ctx.paths, name, content) for name, content in contents.items()}


def launchers_intact(pin: Pin, entry: Installed, ctx: InstallContext) -> bool:
    return all(installed_digest(ctx.paths, lc.name) == entry.launchers.get(lc.name) for lc in pin.launchers)


def pre_existing(pin: Pin, ctx: InstallContext) -> list[str]:
    """Executables of the same names the user already has on PATH (never touched by ivoai)."""
    out: list[str] = []
    for lc in pin.launchers:
        found = ctx.which(lc.name)
        if found is not None:
            out.append(found)
    return out


def record_ownership(pin: Pin, ctx: InstallContext, existing: list[str]) -> list[str]:
    """Record managed launchers and the install root, and pre-existing executables; return warnings."""
    manifest = OwnershipManifest(ctx.paths)
    wanted = [(str(components_dir(ctx.paths) / pin.name), Ownership.MANAGED, "directory")]
    wanted += [(str(bin_dir(ctx.paths) / lc.name), Ownership.MANAGED, "executable") for lc in pin.launchers]
    wanted += [(path, Ownership.PRE_EXISTING, "executable") for path in existing]
    # The repair path: one read when everything is already recorded (no lock, no write).
    known = {(e.path, e.ownership, e.kind, e.component) for e in manifest.entries()}
    warnings: list[str] = []
    for path, ownership, kind in wanted:
        if (path, ownership, kind, pin.name) in known:
            continue
        try:
            manifest.record(pin.name, path, ownership, kind=kind)
        except IvoaiError as exc:  # e.g. recorded under another component: keep going, say so
            warnings.append(exc.message)
    return warnings


def record_ownership_pre_existing(pin: Pin, ctx: InstallContext, existing: list[str]) -> list[str]:
    """Record only the user's own executables (setup --skip-existing used them instead of a pin)."""
    manifest = OwnershipManifest(ctx.paths)
    warnings: list[str] = []
    for path in existing:
        try:
            manifest.record(pin.name, path, Ownership.PRE_EXISTING)
        except IvoaiError as exc:
            warnings.append(exc.message)
    return warnings


def prune_generations(ctx: InstallContext, name: str, keep: set[str]) -> None:
    """Remove generation directories of `name` not in `keep` (current and rollback targets)."""
    base = components_dir(ctx.paths) / name
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(base):
            if (
                entry.is_dir(follow_symlinks=False)
                and not entry.name.startswith(".")
                and entry.name not in keep
            ):
                shutil.rmtree(entry.path, ignore_errors=True)
