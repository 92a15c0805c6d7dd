"""Stage one pinned component into a fresh directory: npm ci, a hashed pip venv, or a verified artifact.

Every installer works in a private staging directory below `$XDG_DATA_HOME/ivoai/components/NAME/`
that is renamed into place only after the install and its checks passed; any failure discards it,
so nothing half-installed is ever promoted. Installer subprocesses get the minimal environment of
`runner.installer_env` (HOME is a private empty directory) and `COMPONENT_INSTALL_TIMEOUT_SECONDS`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ivoai.client.components.errors import DownloadError, InstallerError, IntegrityError
from ivoai.client.components.locks import read_npm_lock, read_pip_lock
from ivoai.client.components.manifest import Pin
from ivoai.client.components.runner import installer_env, run_installer
from ivoai.common.fsio import ensure_private_dir
from ivoai.common.limits import COMPONENT_DOWNLOAD_MAX_BYTES, COMPONENT_INSTALL_TIMEOUT_SECONDS
from ivoai.common.paths import XdgPaths

NPM_REGISTRY = "https://registry.npmjs.org/"
PYPI_INDEX = "https://pypi.org/simple"
INSTALL_LOG = ".ivoai-install.log"


def _noop(_: str) -> None:
    return None


@dataclass
class InstallContext:
    """Where and how to install: roots, the parent environment, offline sources, progress."""

    paths: XdgPaths
    env: Mapping[str, str]
    offline: bool = False
    npm_cache: Path | None = None  # default: $XDG_CACHE_HOME/ivoai/npm
    # A registry mirror: npm rewrites the lock's registry.npmjs.org URLs to it and still checks every
    # tarball against the lock's integrity (tests point it at a loopback server).
    npm_registry: str = NPM_REGISTRY
    npm_fetch_retries: int | None = None  # None: npm's default (2 retries with back-off)
    wheelhouse: Path | None = None  # a directory of wheels (pip --no-index --find-links)
    python: str = sys.executable  # the interpreter Headroom's private venv is created with
    progress: Callable[[str], None] = field(default=_noop)

    def npm_cache_dir(self) -> Path:
        if self.npm_cache is not None:
            return self.npm_cache
        return ensure_private_dir(self.paths.cache, self.paths.cache / "npm")

    def which(self, binary: str) -> str | None:
        """An absolute executable on the parent PATH outside ivoai's managed bin directory."""
        managed = os.path.abspath(self.paths.data / "bin")
        for entry in self.env.get("PATH", os.defpath).split(os.pathsep):
            if not entry or not os.path.isabs(entry) or os.path.abspath(entry) == managed:
                continue
            candidate = os.path.join(entry, binary)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        return None


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _home(dest: Path) -> Path:
    home = dest / ".ivoai-home"
    home.mkdir(mode=0o700)
    return home


def stage_npm(pin: Pin, ctx: InstallContext, dest: Path) -> None:
    """`npm ci --ignore-scripts` of the verified shipped lock into `dest`.

    npm checks every tarball (the platform package of Codex or Claude included) against the lock's
    sha512 integrity; lifecycle scripts never run.

    Raises:
        IntegrityError: the lock fails verification. InstallerError: npm is missing or fails.
    """
    package_json, package_lock = read_npm_lock(pin)
    npm = ctx.which("npm")
    if npm is None:
        raise InstallerError(
            f"{pin.name}: npm is not on PATH; install Node.js and npm (Debian: apt-get install npm)"
        )
    _write(dest / "package.json", package_json)
    _write(dest / "package-lock.json", package_lock)
    argv = [
        npm,
        "ci",
        "--ignore-scripts",
        "--no-audit",
        "--no-fund",
        "--omit=dev",
        "--loglevel=error",
        f"--registry={ctx.npm_registry}",
        "--cache",
        str(ctx.npm_cache_dir()),
    ]
    if ctx.offline:
        argv.append("--offline")
    if ctx.npm_fetch_retries is not None:
        argv.append(f"--fetch-retries={ctx.npm_fetch_retries}")
    ctx.progress(f"{pin.name}: npm ci (lifecycle scripts disabled, integrity checked)")
    home = _home(dest)
    try:
        run_installer(
            argv,
            cwd=dest,
            env=installer_env(ctx.env, home),
            timeout=COMPONENT_INSTALL_TIMEOUT_SECONDS,
            log=dest / INSTALL_LOG,
            what=f"npm ci for {pin.name}",
        )
    except InstallerError:
        if "EINTEGRITY" in _read_tail(dest / INSTALL_LOG):
            raise IntegrityError(
                f"{pin.name}: a downloaded tarball does not match the lock's integrity; npm refused it"
            ) from None
        raise
    finally:
        shutil.rmtree(home, ignore_errors=True)
    _check_npm_version(pin, dest)


def _check_npm_version(pin: Pin, dest: Path) -> None:
    manifest = dest / "node_modules" / (pin.package or "") / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        version = None
    if version != pin.version:
        raise IntegrityError(f"{pin.name}: npm installed {pin.package}@{version}, not {pin.version}")


def stage_pip(pin: Pin, ctx: InstallContext, dest: Path) -> None:
    """A private venv with the lock's wheels only, every file hash-checked (`--require-hashes`).

    Raises:
        IntegrityError: the lock fails verification or a wheel's hash differs (pip refuses it).
        InstallerError: venv creation or pip fails.
    """
    lock = read_pip_lock(pin)
    if ctx.offline and ctx.wheelhouse is None:
        raise DownloadError(f"{pin.name}: offline setup needs --wheelhouse DIR with the pinned wheels")
    _write(dest / "requirements.lock", lock)
    home = _home(dest)
    env = installer_env(ctx.env, home)
    log = dest / INSTALL_LOG
    venv = dest / "venv"
    try:
        ctx.progress(f"{pin.name}: creating a private Python environment")
        run_installer(
            [ctx.python, "-m", "venv", str(venv)],
            cwd=dest,
            env=env,
            timeout=COMPONENT_INSTALL_TIMEOUT_SECONDS,
            log=log,
            what=f"venv for {pin.name}",
        )
        source = (
            ["--no-index", "--find-links", str(ctx.wheelhouse)]
            if ctx.wheelhouse is not None
            else ["--index-url", PYPI_INDEX]
        )
        ctx.progress(f"{pin.name}: pip install --require-hashes (wheels only)")
        try:
            run_installer(
                [
                    str(venv / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--require-hashes",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--no-compile",
                    "--no-cache-dir",
                    *source,
                    "-r",
                    str(dest / "requirements.lock"),
                ],
                cwd=dest,
                env=env,
                timeout=COMPONENT_INSTALL_TIMEOUT_SECONDS,
                log=log,
                what=f"pip install for {pin.name}",
            )
        except InstallerError as exc:
            if "THESE PACKAGES DO NOT MATCH THE HASHES" in _read_tail(log) or "do not match" in exc.message:
                raise IntegrityError(f"{pin.name}: a wheel does not match its pinned hash; refused") from None
            raise
        run_installer(
            [str(venv / "bin" / "python"), "-m", "pip", "check"],
            cwd=dest,
            env=env,
            timeout=COMPONENT_INSTALL_TIMEOUT_SECONDS,
            log=log,
            what=f"pip check for {pin.name}",
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _read_tail(log: Path) -> str:
    try:
        with open(log, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 65536))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def fetch_asset(pin: Pin, ctx: InstallContext) -> Path:
    """The verified download of a pin's asset (from the download cache when it is there and intact).

    Raises:
        DownloadError, IntegrityError.
    """
    from ivoai.client.components.download import download, file_sha256

    asset = pin.asset
    assert asset is not None
    cache = ensure_private_dir(ctx.paths.cache, ctx.paths.cache / "downloads")
    cached = cache / asset.sha256
    limit = min(asset.max_bytes, COMPONENT_DOWNLOAD_MAX_BYTES)
    if cached.is_file() and not cached.is_symlink():
        try:
            if file_sha256(cached, limit) == asset.sha256:
                return cached
        except IntegrityError:
            pass
        cached.unlink()
    if ctx.offline:
        raise DownloadError(f"{pin.name}: offline, and {asset.url} was never downloaded")
    ctx.progress(f"{pin.name}: downloading {asset.url}")
    download(asset.url, cached, sha256=asset.sha256, max_bytes=limit)
    return cached


def stage_artifact(pin: Pin, ctx: InstallContext, dest: Path) -> None:
    """Verify the downloaded asset, then copy (raw) or extract it (bounded) and check each file's digest.

    Raises:
        DownloadError, IntegrityError, ArchiveError.
    """
    from ivoai.client.components.archive import extract
    from ivoai.client.components.download import file_sha256

    asset = pin.asset
    assert asset is not None
    source = fetch_asset(pin, ctx)
    if asset.format == "raw":
        (name,) = asset.files
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target, follow_symlinks=False)
        os.chmod(target, 0o755)
    else:
        ctx.progress(f"{pin.name}: extracting (bounded)")
        extract(source, asset.format, dest)
    for rel, digest in asset.files.items():
        path = dest / rel
        if not path.is_file() or path.is_symlink():
            raise IntegrityError(f"{pin.name}: the asset does not contain {rel}")
        got = file_sha256(path)
        if got != digest:
            raise IntegrityError(f"{pin.name}: {rel} has SHA-256 {got}, not the pinned {digest}; refused")


STAGERS: dict[str, Callable[[Pin, InstallContext, Path], None]] = {
    "npm": stage_npm,
    "pip": stage_pip,
    "artifact": stage_artifact,
}

_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def version_tuple(text: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) from `v20.20.2`, `20.0.0`, or None."""
    match = _VERSION.search(text)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None
