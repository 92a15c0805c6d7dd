"""Open a path below a directory descriptor with no symlink anywhere on it, in one system call if possible.

Linux >= 5.6 has `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`: the kernel refuses any
symlink (and any `..` escape) on the whole path, atomically, so `skill/SKILL.md` opens with no race
between checking `skill` and opening below it. Python's `os` module does not expose `openat2`, so
it is called through `ctypes` (libc's `syscall`). Where it is missing (another OS, an old kernel, a
seccomp filter that answers ENOSYS/EPERM), the same guarantee comes from walking one component at a
time with O_NOFOLLOW (`fsio.open_beneath`), which costs one extra open per component.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

from ivoai.common.errors import UnsafePathError
from ivoai.common.fsio import open_beneath

_SYS_OPENAT2 = (
    {"x86_64": 437, "aarch64": 437, "arm64": 437}.get(os.uname().machine) if sys.platform == "linux" else None
)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _State:
    syscall: ctypes._CFuncPtr | None = None  # type: ignore[name-defined]
    usable = _SYS_OPENAT2 is not None
    # One `open_how` per flag set, built once: the kernel only reads it, and building the structure
    # and its pointer on every call was a quarter of the cost of opening a SKILL.md.
    how: dict[int, tuple[_OpenHow, object]] = {}


_HOW_SIZE = ctypes.sizeof(_OpenHow)


def _syscall() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    if _State.syscall is None and _State.usable:
        try:
            func = ctypes.CDLL(None, use_errno=True).syscall
        except (OSError, AttributeError):
            _State.usable = False
            return None
        func.restype = ctypes.c_long
        _State.syscall = func
    return _State.syscall


def _how(flags: int) -> object:
    cached = _State.how.get(flags)
    if cached is None:
        how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
        cached = _State.how[flags] = (how, ctypes.byref(how))
    return cached[1]


def open_no_symlinks(dir_fd: int, rel: str, flags: int = os.O_RDONLY) -> int:
    """Open `rel` (relative, no `..`) below `dir_fd`; a symlink on any component is refused.

    Raises:
        UnsafePathError: a symlink or an escape on the path.
        FileNotFoundError / OSError: as `os.open`.
    """
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    func = _syscall()
    if func is not None:
        fd = int(func(_SYS_OPENAT2, dir_fd, os.fsencode(rel), _how(flags), _HOW_SIZE))
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        if err in (errno.ELOOP, errno.EXDEV):
            raise UnsafePathError(f"{rel} has a symlink on its path (never followed)")
        if err not in (errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG):
            raise OSError(err, os.strerror(err), rel)
        _State.usable = False  # this kernel or sandbox has no usable openat2: walk from now on
        _State.syscall = None
    return open_beneath(dir_fd, rel, flags)
