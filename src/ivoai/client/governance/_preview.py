"""Large tool output: bounded head and tail, byte summary and artifact reference (seed 001).

`preview_large_output` stores the exact bytes first (ArtifactStore) and returns the bounded
preview. `import_tool_output` imports a tool's temporary output file, but only from a trusted
directory ivoai itself created (0700, owned by the user) and only by a plain file name: a forged
name (`../x`, an absolute path, a symlink) is neither read nor deleted. A suspected credential
removes the preview and deletes both the temporary file and the staged artifact.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ivoai.client.governance._metrics import ArtifactMetrics
from ivoai.client.workingcontext import (
    ArtifactStore,
    Budget,
    Capture,
    EvidenceRole,
    capture,
)
from ivoai.client.workingcontext._store import Source
from ivoai.common.errors import UnsafePathError
from ivoai.common.fsio import open_private_dir


@dataclass(frozen=True)
class LargeOutputPreview:
    """Head, tail and byte summary as shown to the model, plus the capture it came from."""

    head_bytes: int
    tail_bytes: int
    total_bytes: int
    text: str
    capture: Capture

    @property
    def withheld(self) -> bool:
        """True when a suspected credential removed the preview (nothing was stored)."""
        return self.capture.projection.mode == "withheld"


def preview_large_output(
    store: ArtifactStore,
    data: Source,
    *,
    session_id: str,
    payload_type: str = "log",
    budget: Budget = Budget.BALANCED,
    failed: bool = False,
    task_id: str | None = None,
    worker_id: str | None = None,
    metrics: ArtifactMetrics | None = None,
) -> LargeOutputPreview:
    """Store `data` (bytes or a stream), then return its bounded preview (head/tail when compressible)."""
    cap = capture(
        store,
        data,
        session_id=session_id,
        payload_type=payload_type,
        role=EvidenceRole.OUTPUT,
        task_id=task_id,
        worker_id=worker_id,
        failed=failed,
        budget=budget,
    )
    if metrics is not None:
        metrics.record(cap)
    p = cap.projection
    return LargeOutputPreview(p.head_bytes, p.tail_bytes, p.total_bytes, p.text, cap)


def import_tool_output(
    store: ArtifactStore,
    trusted_dir: Path,
    name: str,
    *,
    session_id: str,
    payload_type: str = "log",
    budget: Budget = Budget.BALANCED,
    failed: bool = False,
    metrics: ArtifactMetrics | None = None,
) -> LargeOutputPreview:
    """Import the temporary output file `trusted_dir/name`, delete it, and preview it.

    Raises:
        UnsafePathError: `name` is not a plain file name, is a symlink or not a regular file, or
            `trusted_dir` is not a private directory of ours. Nothing is read or deleted then.
    """
    if not name or "/" in name or "\x00" in name or name in (".", ".."):
        raise UnsafePathError(
            f"tool output name {name[:64]!r} must be a plain file name inside the trusted directory"
        )
    dfd = open_private_dir(trusted_dir, trusted_dir)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePathError(f"tool output {name!r} is a symlink; not imported") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                raise UnsafePathError(f"tool output {name!r} is not a regular file of yours; not imported")
            with os.fdopen(os.dup(fd), "rb") as stream:
                preview = preview_large_output(
                    store, stream, session_id=session_id, payload_type=payload_type, budget=budget,
                    failed=failed, metrics=metrics,
                )  # fmt: skip
        finally:
            os.close(fd)
        # The temporary output is consumed in every outcome (stored, withheld, degraded): it was ours.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dfd)
    finally:
        os.close(dfd)
    return preview
