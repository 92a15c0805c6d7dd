"""Checkpoints of an AUTO session: the bounded, secret-free state a failover or a resume starts from.

A checkpoint is written by the primary through the orchestrator tool `orchestration_checkpoint`,
and by the supervisor at failover. It holds the objective, decisions, completed work, changed file
names, checks, outstanding work, blockers, the next step, writes whose outcome is uncertain, and
refs to artifacts (ArtifactStore IDs only: never their content). No transcript, no credentials, no
terminal control bytes (AUTO.md, "Quota"): every string is checked before anything is written.

- **Refused with a clear error** (the field is named, nothing is written): a string with a terminal
  control byte (C0 other than tab and newline, DEL, C1: ESC sequences would reach the next
  primary's terminal through the brief), or secret-shaped text (the WorkingContext credential
  scanner, `scan_bytes`: the message names the kind of credential, never the value); a document
  above AUTO_CHECKPOINT_MAX_BYTES (32 KiB) names its size and the limit.
- **Stored** as `$XDG_STATE_HOME/ivoai/auto/<chain>.checkpoint.json` (0600 in 0700, atomic, under
  a lock): `<chain>` is the first session of an AUTO chain (a failover opens the alternate as a new
  session of the same chain), so the alternate and `ivoai session resume|handoff|recover` read the
  checkpoint its predecessor wrote. `seq` grows by one per write; `source` says who wrote it.
"""

from __future__ import annotations

import json
import time
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from ivoai.client.orchestration._errors import OrchestrationError
from ivoai.client.orchestration._state import read_json_doc
from ivoai.client.sessions.records import check_session_id
from ivoai.client.workingcontext import ARTIFACT_ID_PATTERN, scan_bytes
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import atomic_write, file_lock
from ivoai.common.limits import (
    AUTO_BRIEF_OBJECTIVE_MAX_CHARS,
    AUTO_CHECKPOINT_ITEM_MAX_CHARS,
    AUTO_CHECKPOINT_ITEMS_MAX,
    AUTO_CHECKPOINT_MAX_BYTES,
    AUTO_CHECKPOINT_REFS_MAX,
    AUTO_WORKTREE_FILES_MAX,
)
from ivoai.common.paths import XdgPaths, xdg_paths

CHECKPOINT_SCHEMA = 1
AUTO_DIR = "auto"
Source = Literal["primary", "supervisor"]

Item = Annotated[str, StringConstraints(min_length=1, max_length=AUTO_CHECKPOINT_ITEM_MAX_CHARS)]
Items = Annotated[list[Item], Field(max_length=AUTO_CHECKPOINT_ITEMS_MAX)]
FileName = Annotated[str, StringConstraints(min_length=1, max_length=AUTO_CHECKPOINT_ITEM_MAX_CHARS)]
Ref = Annotated[str, StringConstraints(pattern=ARTIFACT_ID_PATTERN)]


class CheckpointRefusedError(OrchestrationError):
    """A checkpoint was refused (control bytes, secret-shaped text, size); nothing was written."""

    code = "checkpoint_refused"


class CheckpointBody(BaseModel):
    """What a checkpoint says about the work (the `orchestration_checkpoint` arguments)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    objective: Annotated[str, StringConstraints(min_length=1, max_length=AUTO_BRIEF_OBJECTIVE_MAX_CHARS)]
    decisions: Items = Field(default_factory=list)
    completed: Items = Field(default_factory=list)
    changed_files: Annotated[list[FileName], Field(max_length=AUTO_WORKTREE_FILES_MAX)] = Field(
        default_factory=list
    )
    checks: Items = Field(default_factory=list)
    outstanding: Items = Field(default_factory=list)
    blockers: Items = Field(default_factory=list)
    next_step: Annotated[str, StringConstraints(max_length=AUTO_CHECKPOINT_ITEM_MAX_CHARS)] = ""
    uncertain_effects: Items = Field(default_factory=list)
    refs: Annotated[list[Ref], Field(max_length=AUTO_CHECKPOINT_REFS_MAX)] = Field(default_factory=list)


def _control_byte(text: str) -> str | None:
    """The first terminal control character in `text` (tab and newline are text), or None."""
    for ch in text:
        if ch in "\t\n":
            continue
        if unicodedata.category(ch) == "Cc":  # C0, DEL and C1 (ESC, CSI 0x9b, ...)
            return ch
    return None


def _strings(value: Any, where: str) -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}" if where else str(key))


def check_text(doc: Mapping[str, Any], prefix: str = "checkpoint") -> None:
    """Refuse terminal control bytes and secret-shaped text anywhere in `doc`, naming the field.

    Raises:
        CheckpointRefusedError: the first offending field (the value itself is never echoed).
    """
    for where, text in _strings(dict(doc), prefix):
        bad = _control_byte(text)
        if bad is not None:
            raise CheckpointRefusedError(
                f"{where}: contains the terminal control character U+{ord(bad):04X}; "
                "checkpoints hold plain text only"
            )
        found = scan_bytes(text.encode("utf-8"))
        if found:
            raise CheckpointRefusedError(
                f"{where}: looks like a credential ({', '.join(found)}); checkpoints never hold secrets"
            )


def parse_body(args: Mapping[str, Any]) -> CheckpointBody:
    """Validate a checkpoint's fields (types, counts, lengths, control bytes, secrets).

    Raises:
        CheckpointRefusedError: naming the field and the limit.
    """
    check_text(args)
    try:
        return CheckpointBody.model_validate(dict(args))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "checkpoint"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise CheckpointRefusedError(f"checkpoint.{where}: {err['msg']}{more}") from None


@dataclass(frozen=True)
class Checkpoint:
    """A stored checkpoint: the body plus who wrote it, when, and the work tree then."""

    chain: str
    seq: int
    source: Source
    session_id: str
    vendor: str | None
    written_at: float
    body: CheckpointBody
    worktree: Mapping[str, Any] | None = None  # branch, head and changed names when it was written
    failover: Mapping[str, Any] | None = None  # the supervisor's: from/to vendor, verdict, reset

    def to_dict(self) -> dict[str, Any]:
        """The stored document."""
        return {
            "schema": CHECKPOINT_SCHEMA,
            "chain": self.chain,
            "seq": self.seq,
            "source": self.source,
            "session_id": self.session_id,
            "vendor": self.vendor,
            "written_at": self.written_at,
            "checkpoint": self.body.model_dump(mode="json"),
            "worktree": dict(self.worktree) if self.worktree is not None else None,
            "failover": dict(self.failover) if self.failover is not None else None,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Checkpoint | None:
        """Parse a stored document; None when it is not one (it is then ignored, never trusted)."""
        try:
            return cls(
                chain=check_session_id(str(doc["chain"])),
                seq=int(doc["seq"]),
                source="supervisor" if doc.get("source") == "supervisor" else "primary",
                session_id=check_session_id(str(doc["session_id"])),
                vendor=str(doc["vendor"]) if doc.get("vendor") in ("codex", "claude") else None,
                written_at=float(doc["written_at"]),
                body=CheckpointBody.model_validate(doc["checkpoint"]),
                worktree=doc.get("worktree") if isinstance(doc.get("worktree"), dict) else None,
                failover=doc.get("failover") if isinstance(doc.get("failover"), dict) else None,
            )
        except (KeyError, TypeError, ValueError, IvoaiError):
            return None


def checkpoint_path(chain: str, paths: XdgPaths | None = None) -> Path:
    """Where a chain's checkpoint lives (the ID is validated before the path is built)."""
    paths = paths or xdg_paths()
    return paths.state / AUTO_DIR / f"{check_session_id(chain)}.checkpoint.json"


def read_checkpoint(chain: str, paths: XdgPaths | None = None) -> Checkpoint | None:
    """The chain's last checkpoint, or None (none written, or unreadable)."""
    paths = paths or xdg_paths()
    doc = read_json_doc(paths.state, checkpoint_path(chain, paths), AUTO_CHECKPOINT_MAX_BYTES)
    return Checkpoint.from_dict(doc) if doc is not None else None


def write_checkpoint(
    chain: str,
    body: CheckpointBody,
    *,
    source: Source,
    session_id: str,
    vendor: str | None,
    worktree: Mapping[str, Any] | None = None,
    failover: Mapping[str, Any] | None = None,
    paths: XdgPaths | None = None,
    now: float | None = None,
) -> Checkpoint:
    """Validate and store a checkpoint (atomic, 0600, seq + 1 under the chain's lock).

    Raises:
        CheckpointRefusedError: secret-shaped text or control bytes anywhere (work-tree names
            included), or the document exceeds AUTO_CHECKPOINT_MAX_BYTES.
    """
    paths = paths or xdg_paths()
    path = checkpoint_path(chain, paths)
    check_text(body.model_dump(mode="json"))
    check_text(dict(worktree or {}), "checkpoint.worktree")
    check_text(dict(failover or {}), "checkpoint.failover")
    with file_lock(paths.state, path.with_name(f".{path.name}.lock")):
        previous = read_checkpoint(chain, paths)
        cp = Checkpoint(
            chain=chain,
            seq=(previous.seq + 1) if previous is not None else 1,
            source=source,
            session_id=session_id,
            vendor=vendor,
            written_at=time.time() if now is None else now,
            body=body,
            worktree=worktree,
            failover=failover,
        )
        data = (json.dumps(cp.to_dict(), ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        if len(data) > AUTO_CHECKPOINT_MAX_BYTES:
            raise CheckpointRefusedError(
                f"the checkpoint is {len(data)} bytes; the limit is {AUTO_CHECKPOINT_MAX_BYTES} bytes "
                "(shorten the lists: it holds names and refs, not content)"
            )
        atomic_write(paths.state, path, data)
    return cp
