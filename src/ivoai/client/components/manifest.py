"""The pinned component manifest (`manifest.toml`, package data) and its resolution for this machine.

A `Component` is what the manifest says; a `Pin` is that component resolved for this OS, CPU and
Python: the one lock or asset to install, launcher targets with `{platform}` filled in, and a
digest over all of it. The digest names the install directory (`<version>-<digest[:12]>`), so a
changed lock or asset is a different install even at the same version.

Test hook: `IVOAI_TEST_COMPONENTS_MANIFEST` names another manifest file (its lock paths are relative
to it). It exists so tests can serve artifacts from loopback; it is never written anywhere and the
CLI prints a warning whenever it is in effect.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ivoai.client.components.errors import ManifestError, UnknownComponentError, UnsupportedPlatformError
from ivoai.common.validate import is_int

MANIFEST_SCHEMA = 1
TEST_MANIFEST_ENV = "IVOAI_TEST_COMPONENTS_MANIFEST"
DEFAULT_MANIFEST = Path(__file__).resolve().parent / "manifest.toml"

KINDS = ("npm", "pip", "artifact")
ARCHIVE_FORMATS = ("raw", "tar.gz", "zip")
LAUNCHER_KINDS = ("node_script", "exec", "copy")
NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")
SHA256 = re.compile(r"[0-9a-f]{64}")
SHA512_SRI = re.compile(r"sha512-[A-Za-z0-9+/]{86}==")
# Exact versions only: digits with an optional pre-release/build suffix, or an upstream release tag
# such as `bin-v1.1.3`. `latest`, ranges (`^1`, `~1`, `>=1`, `1.x`, `*`) and empty strings never match.
EXACT_VERSION = re.compile(r"(?:[a-z]+-)?v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?")
FLOATING = frozenset({"latest", "next", "stable", "canary", "beta", "nightly", "*", ""})


@dataclass(frozen=True)
class Probe:
    """The compatibility probe: run the launcher with `args`; `pattern` must match its output."""

    args: tuple[str, ...]
    pattern: str
    check_version: bool = True  # group 1 of `pattern` must equal the pinned version


@dataclass(frozen=True)
class Launcher:
    """One managed launcher in `$XDG_DATA_HOME/ivoai/bin/NAME`."""

    name: str
    kind: str  # node_script | exec | copy
    target: str  # relative to the install directory


@dataclass(frozen=True)
class LockRef:
    """A lock shipped as package data: an npm directory (package.json + lock) or a pip lock file."""

    path: Path
    sha256: str
    integrity: str | None = (
        None  # npm: the top-level package's expected integrity (overrides the component's)
    )


@dataclass(frozen=True)
class Asset:
    """A downloadable artifact for one platform."""

    url: str
    sha256: str
    format: str  # raw | tar.gz | zip
    max_bytes: int
    files: Mapping[str, str]  # relative path -> SHA-256 each must have after extraction


@dataclass(frozen=True)
class Component:
    """One manifest entry, before platform resolution."""

    name: str
    display: str
    kind: str
    version: str
    license: str
    default: bool
    provenance: str
    probe: Probe
    launchers: tuple[Launcher, ...]
    required: tuple[str, ...]
    package: str | None = None
    integrity: str | None = None
    node_min: str | None = None
    python_min: str | None = None
    provides_node: str | None = None
    locks: Mapping[str, LockRef] = field(default_factory=dict)
    assets: Mapping[str, Asset] = field(default_factory=dict)
    platforms: tuple[str, ...] = ()


@dataclass(frozen=True)
class Target:
    """This machine as the manifest keys it."""

    os: str  # linux | darwin
    cpu: str  # x64 | arm64 (npm's names)
    machine: str  # x86_64 | aarch64 (Python's names)
    python: str  # cp311

    @property
    def platform(self) -> str:
        return f"{self.os}-{self.cpu}"

    @property
    def pip_key(self) -> str:
        return f"{self.python}-{self.os}-{self.machine}"


@dataclass(frozen=True)
class Pin:
    """A component resolved for one Target: exactly what gets installed, and its digest."""

    component: Component
    target: Target
    lock: LockRef | None
    asset: Asset | None
    package: str | None
    integrity: str | None
    launchers: tuple[Launcher, ...]
    required: tuple[str, ...]
    provides_node: str | None
    digest: str

    @property
    def name(self) -> str:
        return self.component.name

    @property
    def version(self) -> str:
        return self.component.version

    @property
    def generation(self) -> str:
        """The install directory's name: version plus a digest prefix (a new lock is a new directory)."""
        return f"{self.component.version}-{self.digest[:12]}"


@dataclass(frozen=True)
class Manifest:
    """All components, in manifest order."""

    path: Path
    components: Mapping[str, Component]
    test_override: bool = False

    def get(self, name: str) -> Component:
        """The component called `name`.

        Raises:
            UnknownComponentError: not in the manifest (the message lists the known names).
        """
        try:
            return self.components[name]
        except KeyError:
            known = ", ".join(self.components)
            raise UnknownComponentError(f"unknown component {name!r}; known components: {known}") from None

    def defaults(self) -> list[str]:
        return [c.name for c in self.components.values() if c.default]


def current_target() -> Target:
    """The Target of the running interpreter and machine."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    cpu = {"x86_64": "x64", "aarch64": "arm64"}.get(machine, machine)
    return Target(
        os=sys.platform if sys.platform in ("linux", "darwin") else sys.platform,
        cpu=cpu,
        machine=machine,
        python=f"cp{sys.version_info.major}{sys.version_info.minor}",
    )


def _fail(where: str, message: str) -> ManifestError:
    return ManifestError(f"manifest {where}: {message}")


def _str(doc: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise _fail(where, f"`{key}` must be a non-empty string")
    return value


def check_exact_version(version: str, where: str) -> str:
    """Refuse `latest`, tags and ranges: a component install target is always one exact version."""
    if version.strip().lower() in FLOATING or not EXACT_VERSION.fullmatch(version):
        raise _fail(where, f"version {version!r} is not an exact version (`latest` is never a target)")
    return version


def _probe(doc: Any, where: str) -> Probe:
    if not isinstance(doc, dict) or not isinstance(doc.get("args"), list):
        raise _fail(where, "`probe` needs `args` (a list) and `pattern`")
    args = tuple(str(a) for a in doc["args"])
    pattern = _str(doc, "pattern", where) or ""
    try:
        compiled = re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        raise _fail(where, f"probe pattern does not compile ({exc})") from None
    check = bool(doc.get("check_version", True))
    if check and compiled.groups < 1:
        raise _fail(where, "a probe that checks the version needs a capture group")
    return Probe(args, pattern, check)


def _launchers(doc: Any, where: str) -> tuple[Launcher, ...]:
    if doc is None:
        return ()
    if not isinstance(doc, dict):
        raise _fail(where, "`launchers` must be a table")
    out: list[Launcher] = []
    for name, spec in doc.items():
        if not re.fullmatch(r"[a-z][a-z0-9._-]{0,63}", name) or not isinstance(spec, dict) or len(spec) != 1:
            raise _fail(where, f"launcher {name!r} needs exactly one of {', '.join(LAUNCHER_KINDS)}")
        kind, target = next(iter(spec.items()))
        if kind not in LAUNCHER_KINDS or not isinstance(target, str):
            raise _fail(where, f"launcher {name!r}: unknown kind {kind!r}")
        _relative(target, where)
        out.append(Launcher(name, kind, target))
    return tuple(out)


def _relative(path: str, where: str) -> str:
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") or "**" in p for p in parts):
        raise _fail(where, f"{path!r} must be a relative path without `..`")
    return path


def _locks(doc: Any, base: Path, where: str) -> dict[str, LockRef]:
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise _fail(where, "`locks` must be a table")
    out: dict[str, LockRef] = {}
    for key, spec in doc.items():
        if not isinstance(spec, dict):
            raise _fail(where, f"lock {key!r} must be a table")
        rel = _relative(_str(spec, "path", where) or "", where)
        digest = spec.get("sha256")
        if not isinstance(digest, str) or not SHA256.fullmatch(digest):
            raise _fail(where, f"lock {key!r} needs the SHA-256 of its files (run scripts/lock-components)")
        integrity = spec.get("integrity")
        if integrity is not None and (not isinstance(integrity, str) or not SHA512_SRI.fullmatch(integrity)):
            raise _fail(where, f"lock {key!r}: `integrity` must be a sha512 SRI string")
        out[key] = LockRef(base / rel, digest, integrity)
    return out


def _assets(doc: Any, where: str, *, allow_loopback: bool) -> dict[str, Asset]:
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise _fail(where, "`assets` must be a table")
    out: dict[str, Asset] = {}
    for key, spec in doc.items():
        if not isinstance(spec, dict):
            raise _fail(where, f"asset {key!r} must be a table")
        url = _str(spec, "url", where) or ""
        # Plain HTTP only to loopback, and only in a test manifest (the stand-in archive server).
        if not (url.startswith("https://") or (allow_loopback and url.startswith("http://127.0.0.1:"))):
            raise _fail(where, f"asset {key!r}: only https:// URLs are allowed")
        digest = spec.get("sha256")
        if not isinstance(digest, str) or not SHA256.fullmatch(digest):
            raise _fail(where, f"asset {key!r}: `sha256` must be 64 lowercase hex digits")
        fmt = spec.get("format")
        if fmt not in ARCHIVE_FORMATS:
            raise _fail(where, f"asset {key!r}: `format` must be one of {', '.join(ARCHIVE_FORMATS)}")
        max_bytes = spec.get("max_bytes")
        if not is_int(max_bytes, 1):
            raise _fail(where, f"asset {key!r}: `max_bytes` must be a positive integer")
        files = spec.get("files")
        if not isinstance(files, dict) or not files:
            raise _fail(where, f"asset {key!r}: `files` must name the files it provides")
        for rel, sha in files.items():
            _relative(rel, where)
            if not isinstance(sha, str) or not SHA256.fullmatch(sha):
                raise _fail(where, f"asset {key!r}: file {rel!r} needs a SHA-256")
        if fmt == "raw" and len(files) != 1:
            raise _fail(where, f"asset {key!r}: a raw asset is exactly one file")
        out[key] = Asset(url, digest, str(fmt), max_bytes, dict(files))
    return out


def _component(name: str, doc: Any, base: Path, *, allow_loopback: bool = False) -> Component:
    where = f"component {name!r}"
    if not NAME.fullmatch(name) or not isinstance(doc, dict):
        raise _fail(where, "invalid name or entry")
    kind = _str(doc, "kind", where)
    if kind not in KINDS:
        raise _fail(where, f"`kind` must be one of {', '.join(KINDS)}")
    version = check_exact_version(_str(doc, "version", where) or "", where)
    integrity = _str(doc, "integrity", where, required=False)
    if integrity is not None and not SHA512_SRI.fullmatch(integrity):
        raise _fail(where, "`integrity` must be a sha512 SRI string")
    required = doc.get("required", [])
    if not isinstance(required, list):
        raise _fail(where, "`required` must be a list of relative paths")
    component = Component(
        name=name,
        display=_str(doc, "display", where, required=False) or name,
        kind=kind,
        version=version,
        license=_str(doc, "license", where) or "",
        default=bool(doc.get("default", False)),
        provenance=_str(doc, "provenance", where) or "",
        probe=_probe(doc.get("probe"), where),
        launchers=_launchers(doc.get("launchers"), where),
        required=tuple(_relative(str(r), where) for r in required),
        package=_str(doc, "package", where, required=kind != "artifact"),
        integrity=integrity,
        node_min=_str(doc, "node_min", where, required=False),
        python_min=_str(doc, "python_min", where, required=False),
        provides_node=_str(doc, "provides_node", where, required=False),
        locks=_locks(doc.get("locks"), base, where),
        assets=_assets(doc.get("assets"), where, allow_loopback=allow_loopback),
        platforms=tuple(str(p) for p in doc.get("platforms", [])),
    )
    if kind in ("npm", "pip") and not component.locks:
        raise _fail(where, f"a {kind} component needs at least one lock")
    if kind == "artifact" and not component.assets:
        raise _fail(where, "an artifact component needs at least one asset")
    return component


def parse_manifest(text: str, path: Path, *, test_override: bool = False) -> Manifest:
    """Parse and validate manifest text (lock paths resolve relative to `path`'s directory).

    Raises:
        ManifestError: anything malformed, including a non-exact version.
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: invalid TOML ({exc})") from None
    if doc.get("schema") != MANIFEST_SCHEMA:
        raise ManifestError(f"{path}: expected `schema = {MANIFEST_SCHEMA}`")
    entries = doc.get("components")
    if not isinstance(entries, dict) or not entries:
        raise ManifestError(f"{path}: no [components.*] tables")
    base = path.parent
    components = {
        name: _component(name, entry, base, allow_loopback=test_override) for name, entry in entries.items()
    }
    return Manifest(path, components, test_override)


def load_manifest(path: Path | None = None, env: Mapping[str, str] | None = None) -> Manifest:
    """The shipped manifest, or the test hook's file when `IVOAI_TEST_COMPONENTS_MANIFEST` is set."""
    env = os.environ if env is None else env
    override = env.get(TEST_MANIFEST_ENV, "")
    chosen = path or (Path(override) if override else DEFAULT_MANIFEST)
    try:
        text = chosen.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"{chosen}: cannot read the component manifest ({exc.strerror})") from None
    return parse_manifest(text, chosen, test_override=path is not None or bool(override))


def _sub(value: str | None, target: Target) -> str | None:
    return None if value is None else value.replace("{platform}", target.platform)


def resolve(component: Component, target: Target | None = None) -> Pin:
    """The component for this machine: its lock or asset, substituted paths and the pin digest.

    Raises:
        UnsupportedPlatformError: nothing is pinned for this OS/CPU (or Python, for pip components).
    """
    target = target or current_target()
    lock: LockRef | None = None
    asset: Asset | None = None
    if component.platforms and target.platform not in component.platforms:
        raise UnsupportedPlatformError(
            f"{component.name} {component.version} is not pinned for {target.platform} "
            f"(pinned: {', '.join(component.platforms)})"
        )
    if component.kind == "pip":
        lock = component.locks.get(target.pip_key)
        if lock is None:
            raise UnsupportedPlatformError(
                f"{component.name} {component.version} has no hashed lock for {target.pip_key} "
                f"(locked: {', '.join(sorted(component.locks))})"
            )
    elif component.kind == "npm":
        lock = component.locks.get("any") or component.locks.get(target.platform)
        if lock is None:
            raise UnsupportedPlatformError(
                f"{component.name} {component.version} has no lock for {target.platform} "
                f"(locked: {', '.join(sorted(component.locks))})"
            )
    else:
        asset = component.assets.get(target.platform)
        if asset is None:
            raise UnsupportedPlatformError(
                f"{component.name} {component.version} has no pinned asset for {target.platform} "
                f"(pinned: {', '.join(sorted(component.assets))})"
            )
    launchers = tuple(Launcher(lc.name, lc.kind, _sub(lc.target, target) or "") for lc in component.launchers)
    required = tuple(_sub(r, target) or "" for r in component.required)
    integrity = (lock.integrity if lock is not None and lock.integrity else None) or component.integrity
    package = _sub(component.package, target)
    provides_node = _sub(component.provides_node, target)
    identity = {
        "name": component.name,
        "kind": component.kind,
        "version": component.version,
        "package": package,
        "integrity": integrity,
        "lock": lock.sha256 if lock else None,
        "asset": [asset.url, asset.sha256, asset.format, sorted(asset.files.items())] if asset else None,
        "launchers": [[lc.name, lc.kind, lc.target] for lc in launchers],
        "provides_node": provides_node,
        "target": target.pip_key if component.kind == "pip" else target.platform,
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return Pin(component, target, lock, asset, package, integrity, launchers, required, provides_node, digest)
