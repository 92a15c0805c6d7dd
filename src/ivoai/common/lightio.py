"""Import-light private file I/O for the launch path and hooks (`os` only; `fcntl` for appends).

`ivoai.common.fsio` is the general implementation, but it imports pathlib and secrets, which cost
more than the whole launch budget (docs/launcher.md, "Start-up cost"). What the launch path, the
memory hooks and compression telemetry need is implemented here once, with the same rules, and
`fsio` reuses the pieces that are the same (creating missing ancestors 0700, writing a whole
buffer): every directory from the ivoai root down is opened with O_NOFOLLOW and must be ours with
mode 0700 (created so when missing), files are 0600 and never followed, and a document is published
by an atomic rename of a private staging file. `xdg_root` is `common.paths`' XDG rule as strings
(`paths.xdg_paths` is built on it), and `json_dumps` renders exactly what `common.jsonio.dumps`
does for the types it accepts, without importing `json`.

Unlike `fsio.atomic_write` these writes do not fsync: session records, telemetry and hook state are
lifecycle metadata. A crash never leaves a torn file (rename is atomic); after a power loss a record
may be older than the process it described, which its PID start marker already reports as `lost`.
"""

from __future__ import annotations

import os

from ivoai.common.errors import UnsafePathError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

APP = "ivoai"
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


def xdg_root(var: str, default: str, env: Mapping[str, str] | None = None) -> str:
    """ivoai's root below the XDG base directory `var` (`default` below the home when unset).

    The XDG spec says relative values are invalid and must be ignored. Read from `env` (default
    `os.environ`) at each call, never cached.
    """
    env = os.environ if env is None else env
    value = env.get(var, "")
    base = value if value and os.path.isabs(value) else os.path.join(os.path.expanduser("~"), default)
    return os.path.join(base, APP)


def makedirs_private(path: str) -> None:
    """Create `path` and every missing ancestor with mode 0700; existing directories are left alone.

    `os.makedirs` gives intermediate directories the umask's default (usually 0755); the XDG base
    directory spec asks for 0700 on any directory created this way.
    """
    missing = []
    current = os.path.abspath(path)
    while not os.path.lexists(current) and os.path.dirname(current) != current:
        missing.append(current)
        current = os.path.dirname(current)
    for directory in reversed(missing):
        try:  # noqa: SIM105 - contextlib is not loaded on the launch path
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd` (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def open_private_dirs(root: str, *parts: str) -> int:
    """Open (creating 0700 where missing) `root/parts…` without following links; return its fd.

    Raises:
        UnsafePathError: a component is a symlink, not a directory, foreign-owned or not 0700.
    """
    makedirs_private(root)  # the root and any missing ancestors
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


def write_atomic(dir_fd: int, name: str, data: bytes, *, mode: int = 0o600) -> None:
    """Publish `data` as `name` in `dir_fd` via a private staging file and an atomic rename.

    The file gets `mode` exactly (0600 by default; 0700 for an executable wrapper), whatever the umask.
    """
    tmp = f".{name}.tmp-{os.urandom(8).hex()}"
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd
    )
    try:
        try:
            if mode != 0o600:
                os.fchmod(fd, mode)
            write_all(fd, data)
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
