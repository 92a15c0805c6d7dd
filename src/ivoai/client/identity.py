"""ivoai's client identity: `host:<normalized-hostname>` unless the current git work tree was
explicitly initialized with `ivoai project init`, which writes `.ivoai.toml` at the git root.

Merely entering a git repository changes nothing: without the marker the identity stays the host's,
so `/etc`, `/opt` or an unrelated checkout never become accidental projects. The project ID is
derived deterministically from the absolute git root at init time; the marker then is the
source of truth (a clone elsewhere keeps the committed ID). Import-light: stdlib only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ivoai.common.errors import UnsafePathError, ValidationError
from ivoai.common.fsio import atomic_write_in_dir, read_fd_bounded
from ivoai.common.ids import sha256_hex
from ivoai.common.limits import HOSTNAME_MAX_CHARS, PROJECT_MARKER_MAX_BYTES
from ivoai.common.validate import is_int

MARKER_NAME = ".ivoai.toml"
MARKER_SCHEMA_VERSION = 1
PROJECT_ID_PATTERN = re.compile(r"proj_[0-9a-f]{32}")

_MARKER_TEMPLATE = """\
# ivoai project marker, written by `ivoai project init`.
# The ID was derived from this repository's absolute git root. Commit this file to share the
# identity with clones; delete it to return to the host identity.
schema = {schema}

[project]
id = "{project_id}"
"""


class NotInGitRepoError(ValidationError):
    """`project init` outside a git work tree."""

    code = "not_in_git_repo"


class ProjectMarkerError(ValidationError):
    """`.ivoai.toml` is unreadable, malformed, or from a newer ivoai."""

    code = "project_marker_invalid"


def normalize_hostname(raw: str) -> str:
    """Lowercase ASCII (IDNA for non-ASCII), only [a-z0-9.-], no edge dots/dashes; `localhost` if empty."""
    name = raw.strip().rstrip(".")
    with contextlib.suppress(UnicodeError):
        name = name.encode("idna").decode("ascii")
    name = re.sub(r"[^a-z0-9.-]+", "-", name.lower())
    name = re.sub(r"\.{2,}", ".", name)
    name = name.strip(".-")[:HOSTNAME_MAX_CHARS].strip(".-")
    return name or "localhost"


def host_identity(hostname: str | None = None) -> str:
    """`host:<normalized-hostname>` (independent of the current directory)."""
    return "host:" + normalize_hostname(socket.gethostname() if hostname is None else hostname)


def find_git_root(start: Path) -> Path | None:
    """The nearest directory at or above `start` holding `.git` (a directory, or a file for worktrees)."""
    current = Path(os.path.abspath(start))
    for candidate in (current, *current.parents):
        try:
            st = os.lstat(candidate / ".git")
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
            return candidate
    return None


def derive_project_id(git_root: Path) -> str:
    """`proj_` + the first 32 hex digits of SHA-256 over the absolute, resolved git root."""
    return "proj_" + sha256_hex(os.path.realpath(git_root))[:32]


@dataclass(frozen=True)
class Identity:
    """The resolved identity and the evidence behind it."""

    kind: Literal["host", "project"]
    value: str
    git_root: str | None
    marker: str | None
    project_id: str | None
    derived_project_id: str | None

    def as_dict(self) -> dict[str, object]:
        """Stable JSON shape for `status` / `project status`."""
        return {
            "identity": self.value,
            "kind": self.kind,
            "git_root": self.git_root,
            "marker": self.marker,
            "project_id": self.project_id,
            "derived_project_id": self.derived_project_id,
            "marker_matches_root": (
                None if self.project_id is None else self.project_id == self.derived_project_id
            ),
        }


def read_marker(path: Path) -> str | None:
    """The project ID in the marker at `path`, or None when there is no marker.

    Raises:
        ProjectMarkerError: the marker is malformed, too large or from a newer ivoai.
        UnsafePathError: the marker is a symlink or not a regular file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(f"{path} is a symlink; replace it with a regular file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(f"{path} is not a regular file")
        raw = read_fd_bounded(fd, PROJECT_MARKER_MAX_BYTES, what=str(path))
    finally:
        os.close(fd)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProjectMarkerError(f"{path} is not valid TOML ({exc}); fix it or delete it") from None
    schema = data.get("schema")
    if not is_int(schema, 1):
        raise ProjectMarkerError(f"{path}: `schema` must be a positive integer")
    if schema > MARKER_SCHEMA_VERSION:
        raise ProjectMarkerError(
            f"{path} has schema {schema}, newer than this ivoai understands; upgrade ivoai"
        )
    project = data.get("project")
    project_id = project.get("id") if isinstance(project, dict) else None
    if not isinstance(project_id, str) or not PROJECT_ID_PATTERN.fullmatch(project_id):
        raise ProjectMarkerError(f"{path}: project.id must match {PROJECT_ID_PATTERN.pattern}")
    return project_id


def _cwd() -> Path | None:
    try:
        return Path(os.getcwd())
    except FileNotFoundError:
        return None


def resolve_identity(cwd: Path | None = None, *, hostname: str | None = None) -> Identity:
    """The identity for `cwd` (default: the current directory): the marked project, else the host."""
    start = cwd if cwd is not None else _cwd()
    root = find_git_root(start) if start is not None else None
    if root is not None:
        marker = root / MARKER_NAME
        project_id = read_marker(marker)
        if project_id is not None:
            return Identity(
                "project",
                f"project:{project_id}",
                str(root),
                str(marker),
                project_id,
                derive_project_id(root),
            )
    return Identity(
        "host",
        host_identity(hostname),
        None if root is None else str(root),
        None,
        None,
        None if root is None else derive_project_id(root),
    )


@dataclass(frozen=True)
class InitResult:
    """What `project init` did."""

    identity: Identity
    created: bool


def project_init(cwd: Path | None = None) -> InitResult:
    """Write `.ivoai.toml` at the git root of `cwd` (idempotent: an existing marker is kept).

    Raises:
        NotInGitRepoError: `cwd` is not inside a git work tree.
        ProjectMarkerError / UnsafePathError: an existing marker is invalid or a symlink.
    """
    start = cwd if cwd is not None else _cwd()
    root = find_git_root(start) if start is not None else None
    if root is None:
        raise NotInGitRepoError(
            f"{start} is not inside a git work tree (no .git found here or above); "
            "run `git init` first or cd into a repository"
        )
    marker = root / MARKER_NAME
    if read_marker(marker) is not None:
        return InitResult(resolve_identity(root), created=False)
    text = _MARKER_TEMPLATE.format(schema=MARKER_SCHEMA_VERSION, project_id=derive_project_id(root))
    atomic_write_in_dir(marker, text.encode("utf-8"))
    return InitResult(resolve_identity(root), created=True)
