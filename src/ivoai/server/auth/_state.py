"""A JSON state file shared by independent processes: locked mutations, atomic replacement, cached reads.

Readers never take the lock: every writer replaces the file atomically (`fsio.atomic_write`), so a
reader sees the old or the new document, never a torn one. A reader caches the parsed document and
re-reads only when the file's identity (inode, size, mtime) changes, so a per-request credential
check costs one `stat`. Writers take an exclusive `flock` on a sibling lock file, re-read the file
under the lock, apply their change and replace the file before releasing it: two processes (the CLI
and the gateway, or 50 racing enrollment exchanges) can never both consume one code.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import atomic_write, file_lock, open_private_dir, read_private_file_or_none
from ivoai.common.limits import JSON_STATE_MAX_BYTES

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class CorruptStateError(IvoaiError):
    """A state file exists but is not a valid document of its schema."""

    code = "corrupt_state"


class StateFile(Generic[M]):
    """One pydantic document stored at `path` below the private `root`."""

    def __init__(self, root: Path, path: Path, model: type[M]) -> None:
        self.root = root
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self.model = model
        self._cache: tuple[tuple[int, int, int], M] | None = None
        self._cache_lock = threading.Lock()

    def _identity(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _parse(self, raw: bytes | None) -> M:
        if raw is None:
            return self.model()
        try:
            return self.model.model_validate(json.loads(raw))
        except (ValueError, PydanticValidationError) as exc:
            raise CorruptStateError(
                f"{self.path} is not a valid {self.model.__name__} document ({type(exc).__name__}); "
                "restore it from a backup or remove it"
            ) from None

    def read(self) -> M:
        """The current document (cached while the file is unchanged); treat it as read-only."""
        ident = self._identity()
        with self._cache_lock:
            if ident is not None and self._cache is not None and self._cache[0] == ident:
                return self._cache[1]
        raw = read_private_file_or_none(self.root, self.path, JSON_STATE_MAX_BYTES)
        doc = self._parse(raw)
        ident_after = self._identity()
        if ident_after is not None and ident_after == ident:
            with self._cache_lock:
                self._cache = (ident_after, doc)
        return doc

    def mutate(self, change: Callable[[M], T]) -> T:
        """Apply `change` to a fresh copy under the exclusive lock; persist it atomically; return its result.

        `change` may raise to abort: nothing is written then.
        """
        os.close(open_private_dir(self.root, self.path.parent, create=True))
        with file_lock(self.root, self.lock_path):
            raw = read_private_file_or_none(self.root, self.path, JSON_STATE_MAX_BYTES)
            doc = self._parse(raw)
            result = change(doc)
            data = (doc.model_dump_json(indent=1) + "\n").encode("utf-8")
            atomic_write(self.root, self.path, data)
            with self._cache_lock:
                self._cache = None
            return result
