"""Verification of the shipped locks before any installer runs.

npm: the directory's `package.json` and `package-lock.json` must hash to the manifest's SHA-256;
every package `npm ci` can fetch must come from the npm registry with a sha512 `integrity` (bundled
packages ride inside their parent's verified tarball); the top-level package's integrity must equal
the manifest's. npm then checks every tarball against the lock itself.

pip: the lock must hash to the manifest's SHA-256 and consist only of `name==version` lines, each
with at least one `--hash=sha256:…`; the component's own package must be pinned at its version.
pip's `--require-hashes` then refuses any file whose hash is not listed.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from ivoai.client.components.errors import IntegrityError, ManifestError
from ivoai.client.components.manifest import SHA512_SRI, Pin
from ivoai.client.components.state import json_object
from ivoai.common.limits import COMPONENT_LOCK_MAX_BYTES

REGISTRY = "https://registry.npmjs.org/"
_EXACT = re.compile(r"(?:npm:(?:@[a-z0-9._-]+/)?[a-z0-9._-]+@)?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?")
_PIP_LINE = re.compile(
    r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.+!-]*)((?:\s+--hash=sha256:[0-9a-f]{64})+)"
)


def _read(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read(COMPONENT_LOCK_MAX_BYTES + 1)
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read the shipped lock ({exc.strerror})") from None
    if len(data) > COMPONENT_LOCK_MAX_BYTES:
        raise ManifestError(f"{path}: lock exceeds {COMPONENT_LOCK_MAX_BYTES} bytes")
    return data


def npm_lock_digest(package_json: bytes, package_lock: bytes) -> str:
    """SHA-256 over package.json, a NUL byte, package-lock.json (what the manifest records)."""
    return hashlib.sha256(package_json + b"\0" + package_lock).hexdigest()


def read_npm_lock(pin: Pin) -> tuple[bytes, bytes]:
    """The verified (package.json, package-lock.json) bytes of an npm pin.

    Raises:
        IntegrityError: the files do not match the manifest's digest, or the lock lets npm fetch
            something unpinned (no integrity, not from the registry, a link or a range).
        ManifestError: the files are missing or malformed.
    """
    assert pin.lock is not None
    package_json = _read(pin.lock.path / "package.json")
    package_lock = _read(pin.lock.path / "package-lock.json")
    if npm_lock_digest(package_json, package_lock) != pin.lock.sha256:
        raise IntegrityError(f"{pin.lock.path}: the lock does not match the manifest's SHA-256; refusing it")
    check_npm_lock(
        pin, _json(pin.lock.path / "package.json", package_json), _json(pin.lock.path, package_lock)
    )
    return package_json, package_lock


def _json(where: Path, raw: bytes) -> dict[str, Any]:
    return json_object(raw, where, ManifestError, f"{where}: not valid JSON")


def check_npm_lock(pin: Pin, package: dict[str, Any], lock: dict[str, Any]) -> None:
    """Refuse a lock that would let `npm ci` install anything not pinned by integrity."""
    name = pin.name
    for dep, spec in {**package.get("dependencies", {}), **package.get("overrides", {})}.items():
        if not isinstance(spec, str) or not _EXACT.fullmatch(spec):
            raise IntegrityError(f"{name}: {dep} is not pinned to an exact version ({spec!r})")
    if not isinstance(lock.get("lockfileVersion"), int) or lock["lockfileVersion"] < 2:
        raise IntegrityError(f"{name}: the lock must be npm lockfile v2 or v3")
    packages = lock.get("packages")
    if not isinstance(packages, dict) or "" not in packages:
        raise IntegrityError(f"{name}: the lock has no `packages` table")
    for path, entry in packages.items():
        if path == "":
            continue
        if not isinstance(entry, dict):
            raise IntegrityError(f"{name}: lock entry {path} is malformed")
        if entry.get("inBundle"):
            continue  # shipped inside its parent's tarball, which is integrity-checked
        if entry.get("link"):
            raise IntegrityError(f"{name}: lock entry {path} is a link; only registry packages are allowed")
        integrity = entry.get("integrity")
        if not isinstance(integrity, str) or not SHA512_SRI.fullmatch(integrity):
            raise IntegrityError(f"{name}: lock entry {path} has no sha512 integrity")
        resolved = entry.get("resolved")
        if resolved is not None and (not isinstance(resolved, str) or not resolved.startswith(REGISTRY)):
            raise IntegrityError(f"{name}: lock entry {path} does not come from {REGISTRY}")
    top = packages.get(f"node_modules/{pin.package}")
    if not isinstance(top, dict) or top.get("version") != pin.version:
        raise IntegrityError(f"{name}: the lock does not install {pin.package}@{pin.version}")
    if pin.integrity is not None and top.get("integrity") != pin.integrity:
        raise IntegrityError(f"{name}: {pin.package}@{pin.version} integrity differs from the manifest's")


def read_pip_lock(pin: Pin) -> bytes:
    """The verified `--require-hashes` lock of a pip pin.

    Raises:
        IntegrityError: digest mismatch, a line without a hash, or the package not at its pin.
    """
    assert pin.lock is not None
    raw = _read(pin.lock.path)
    if hashlib.sha256(raw).hexdigest() != pin.lock.sha256:
        raise IntegrityError(f"{pin.lock.path}: the lock does not match the manifest's SHA-256; refusing it")
    pins = parse_pip_lock(raw, pin.lock.path)
    want = re.sub(r"[-_.]+", "-", pin.package or "").lower()
    if pins.get(want) != pin.version:
        raise IntegrityError(f"{pin.lock.path}: {pin.package} is not pinned at {pin.version}")
    return raw


def parse_pip_lock(raw: bytes, where: Path) -> dict[str, str]:
    """{normalized name: version} of a hashed lock; anything but `name==version --hash=…` is refused."""
    text = raw.decode("utf-8", "strict").replace("\\\n", " ")
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _PIP_LINE.fullmatch(line)
        if not match:
            raise IntegrityError(f"{where}: line {number} is not `name==version --hash=sha256:…`")
        out[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    if not out:
        raise IntegrityError(f"{where}: the lock pins nothing")
    return out
