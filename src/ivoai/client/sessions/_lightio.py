"""Import-light private file writes for the launch path (`os`, plus `fcntl` for appends).

`ivoai.common.fsio` is the general implementation, but it imports pathlib and secrets, which cost
more than the whole launch budget (docs/launcher.md, "Start-up cost"). The launcher needs just
three operations, implemented here with the same rules: every directory from the ivoai root down is
opened with O_NOFOLLOW and must be ours with mode 0700 (created so when missing), files are 0600
and never followed, and a record is published by an atomic rename of a private staging file.

Unlike `fsio.atomic_write` these writes do not fsync: session records and telemetry are lifecycle
metadata. A crash never leaves a torn file (rename is atomic); after a power loss a record may be
older than the process it described, which its PID start marker already reports as `lost`.
"""

from __future__ import annotations

import os

from ivoai.common.errors import UnsafePathError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _check_dir(fd: int, where: str) -> None:
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
        raise UnsafePathError(f"{where} is owned by uid {st.st_uid}, not by you (uid {os.geteuid()})")
    if st.st_mode & 0o077:
        raise UnsafePathError(
            f"{where} has mode {st.st_mode & 0o7777:04o}, expected 0700; fix: chmod 0700 {where}"
        )


def open_private_dirs(root: str, *parts: str) -> int:
    """Open (creating 0700 where missing) `root/parts…` without following links; return its fd.

    Raises:
        UnsafePathError: a component is a symlink, not a directory, foreign-owned or not 0700.
    """
    missing = []  # the root and any missing ancestors, created 0700 (XDG), not os.makedirs' 0755
    current = os.path.abspath(root)
    while not os.path.lexists(current) and os.path.dirname(current) != current:
        missing.append(current)
        current = os.path.dirname(current)
    for directory in reversed(missing):
        try:  # noqa: SIM105 - contextlib is not loaded on the launch path
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise UnsafePathError(f"{root} is a symlink or not a directory ({exc.strerror})") from None
    where = root
    try:
        _check_dir(fd, where)
        for part in parts:
            where = os.path.join(where, part)
            try:  # noqa: SIM105 - contextlib is not loaded on the launch path
                os.mkdir(part, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise UnsafePathError(f"{where} is a symlink or not a directory ({exc.strerror})") from None
            os.close(fd)
            fd = nfd
            _check_dir(fd, where)
        return fd
    except BaseException:
        os.close(fd)
        raise


def write_atomic(dir_fd: int, name: str, data: bytes) -> None:
    """Publish `data` as `name` in `dir_fd` via a private 0600 staging file and an atomic rename."""
    tmp = f".{name}.tmp-{os.urandom(8).hex()}"
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
    )
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        tmp = ""
    finally:
        if tmp:
            try:  # noqa: SIM105 - contextlib is not loaded on the launch path
                os.unlink(tmp, dir_fd=dir_fd)
            except FileNotFoundError:
                pass


def append_rotating(dir_fd: int, name: str, line: bytes, *, max_bytes: int, keep: int) -> None:
    """Append one line to `name` (0600) under an flock, rotating to `name.1…keep` beyond `max_bytes`."""
    import fcntl  # only telemetry appends; a plain session record write does not need it

    lock = os.open(
        f".{name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
    )
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            size = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_size
        except FileNotFoundError:
            size = 0
        if size and size + len(line) > max_bytes:
            for gen in range(keep, 0, -1):
                src = name if gen == 1 else f"{name}.{gen - 1}"
                try:
                    os.replace(src, f"{name}.{gen}", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                except FileNotFoundError:
                    continue
        fd = os.open(
            name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
        )
        try:
            if os.fstat(fd).st_mode & 0o077:
                os.fchmod(fd, 0o600)
            os.write(fd, line)
        finally:
            os.close(fd)
    finally:
        os.close(lock)


def _string(value: str) -> str:
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def json_dumps(value: object) -> str:
    """Deterministic compact JSON (sorted keys) for str/int/float/bool/None/list/tuple/dict, without `json`.

    Raises:
        TypeError: any other type, or a non-finite float.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise TypeError("non-finite float")
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(json_dumps(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items())
        for key, _ in items:
            if not isinstance(key, str):
                raise TypeError("JSON object keys must be strings")
        return "{" + ", ".join(f"{_string(k)}: {json_dumps(v)}" for k, v in items) + "}"
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


SESSIONS_DIR = "sessions"


def publish_record(state_root: str, doc: dict[str, object]) -> None:
    """Write a session record document as `<state>/sessions/<id>.json` (private, atomic).

    Raises:
        UnsafePathError: an unsafe directory on the way; ValueError: an ID ivoai could not have issued.
    """
    sid = doc.get("id")
    if not (
        isinstance(sid, str)
        and len(sid) == 36
        and sid.startswith("ses_")
        and set(sid[4:]) <= set("0123456789abcdef")
    ):
        raise ValueError("invalid session ID")
    fd = open_private_dirs(state_root, SESSIONS_DIR)
    try:
        write_atomic(fd, f"{sid}.json", (json_dumps(doc) + "\n").encode("utf-8"))
    finally:
        os.close(fd)
