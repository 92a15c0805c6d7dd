"""Managed launchers in `$XDG_DATA_HOME/ivoai/bin/` and the compatibility probe.

A launcher is what `ivoai codex` and doctor find first (`agents.executors.discover`). Three kinds:

* `node_script`: `#!/bin/sh` + `exec NODE SCRIPT "$@"` with both paths absolute (the Node chosen
  at setup: the system's when it satisfies the component's `engines`, else ivoai's pinned Node);
* `exec`: `exec BINARY "$@"` (Claude's native binary from its platform package);
* `copy`: a byte copy of a file of the install (the Caveman proxy, whose launch preflight hashes the
  file itself; Headroom's console script, whose `#!` names its private venv's Python).

Launchers are replaced atomically (private staging file, fsync, rename): a concurrent `ivoai codex`
sees the old launcher or the new one, never a torn file.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path

from ivoai.client.components.errors import ProbeError
from ivoai.client.components.manifest import Launcher, Pin
from ivoai.client.components.runner import installer_env
from ivoai.client.components.state import bin_dir
from ivoai.common.fsio import atomic_write, file_sha256
from ivoai.common.limits import COMPONENT_PROBE_TIMEOUT_SECONDS, PROBE_OUTPUT_MAX_BYTES
from ivoai.common.paths import XdgPaths
from ivoai.common.redact import redact

LAUNCHER_MODE = 0o700


def render(pin: Pin, launcher: Launcher, install: Path, node: str | None) -> bytes | Path:
    """The launcher's bytes (script kinds) or the file to copy (`copy`)."""
    target = install / launcher.target
    if launcher.kind == "copy":
        return target
    header = (
        "#!/bin/sh\n"
        f"# ivoai managed launcher: {pin.name} {pin.version} ({pin.generation}).\n"
        "# Rewritten by `ivoai setup` / `ivoai update`; edits are repaired away.\n"
    )
    if launcher.kind == "node_script":
        if node is None:
            raise ProbeError(f"{pin.name}: no Node.js to run {launcher.target}")
        line = f'exec {shlex.quote(node)} {shlex.quote(str(target))} "$@"\n'
    else:
        line = f'exec {shlex.quote(str(target))} "$@"\n'
    return (header + line).encode("utf-8")


def launcher_path(paths: XdgPaths, name: str) -> Path:
    return bin_dir(paths) / name


def digest_of(content: bytes | Path) -> str:
    if isinstance(content, bytes):
        return hashlib.sha256(content).hexdigest()
    return file_sha256(content)


def installed_digest(paths: XdgPaths, name: str) -> str | None:
    """SHA-256 of the current launcher file, or None when it is missing or not a regular file."""
    path = launcher_path(paths, name)
    try:
        if not path.is_file() or path.is_symlink():
            return None
        return digest_of(path)
    except OSError:
        return None


def write_launcher(paths: XdgPaths, name: str, content: bytes | Path) -> str:
    """Atomically install launcher `name`; return its SHA-256."""
    atomic_write(paths.data, launcher_path(paths, name), content, mode=LAUNCHER_MODE)
    return digest_of(launcher_path(paths, name))


def probe(pin: Pin, executable: Path, env: Mapping[str, str], home: Path) -> str:
    """Run the compatibility probe on `executable`; return what it reported (the version, or `ok`).

    The probe runs with the installer's minimal environment and a private HOME: it never reads or
    writes the user's home (and so never a vendor login).

    Raises:
        ProbeError: it did not start, timed out, failed, or its output does not match the pin.
    """
    spec = pin.component.probe
    try:
        proc = subprocess.run(
            [str(executable), *spec.args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=COMPONENT_PROBE_TIMEOUT_SECONDS,
            env=installer_env(env, home),
            cwd=home,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ProbeError(
            f"{pin.name}: `{' '.join(spec.args)}` did not answer within {COMPONENT_PROBE_TIMEOUT_SECONDS:g} s"
        ) from None
    except OSError as exc:
        raise ProbeError(f"{pin.name}: the probe could not start ({exc.strerror or exc})") from None
    output = (proc.stdout[:PROBE_OUTPUT_MAX_BYTES] + b"\n" + proc.stderr[:PROBE_OUTPUT_MAX_BYTES]).decode(
        "utf-8", "replace"
    )
    if proc.returncode != 0:
        raise ProbeError(
            f"{pin.name}: `{' '.join(spec.args)}` exited {proc.returncode}: {redact(output.strip()[:200])}"
        )
    match = re.search(spec.pattern, output, re.MULTILINE)
    if match is None:
        raise ProbeError(f"{pin.name}: unexpected probe output: {redact(output.strip()[:200])}")
    if not spec.check_version:
        return "ok"
    found = match.group(1)
    if found != pin.version:
        raise ProbeError(f"{pin.name}: reports version {found}, the pin is {pin.version}")
    return found
