"""The bounded projector: what of a worker's output is sent automatically to the primary (seed 000).

The storage budget keeps evidence; the context budget (LIGHT 4 KiB, BALANCED 8 KiB, STRONG 12 KiB,
MAX 16 KiB) bounds only the automatic projection. Rules:

- The exact bytes are persisted first (`capture` stores, then projects; `project` needs the ref).
- `exact_required`, `bypass` and `unsupported` content is never altered: it is shown verbatim when
  it is valid UTF-8 and fits the budget, otherwise replaced by its reference and a note to read it
  with the artifact tools.
- `compressible` content that does not fit gets a deterministic head/tail cut on line (else
  UTF-8) boundaries with a byte summary and the reference.
- If the store is unavailable the result is `degraded`: a note with sizes only, never raw output.
- A credential-looking payload is `withheld`: no preview and nothing stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from ivoai.client.compression.fidelity import FidelityClass, classify
from ivoai.client.workingcontext._contracts import (
    DEFAULT_MEDIA_TYPE,
    ArtifactRef,
    EvidenceRole,
    ResultRef,
    Sensitivity,
)
from ivoai.client.workingcontext._errors import ArtifactRefusedError
from ivoai.client.workingcontext._store import ArtifactStore, Source
from ivoai.common.errors import IvoaiError
from ivoai.common.limits import (
    PROJECTION_BUDGET_BALANCED_BYTES,
    PROJECTION_BUDGET_LIGHT_BYTES,
    PROJECTION_BUDGET_MAX_BYTES,
    PROJECTION_BUDGET_STRONG_BYTES,
)
from ivoai.common.redact import redact

READ_TOOLS = "orchestration_artifact_read / orchestration_artifact_read_range"
_OMIT = "\n[... {n} bytes omitted ...]\n"


class Budget(StrEnum):
    """Context budget for one automatic projection."""

    LIGHT = "light"
    BALANCED = "balanced"
    STRONG = "strong"
    MAX = "max"

    @property
    def bytes(self) -> int:
        """The budget in UTF-8 bytes of projection text."""
        return _BUDGET_BYTES[self]


_BUDGET_BYTES = {
    Budget.LIGHT: PROJECTION_BUDGET_LIGHT_BYTES,
    Budget.BALANCED: PROJECTION_BUDGET_BALANCED_BYTES,
    Budget.STRONG: PROJECTION_BUDGET_STRONG_BYTES,
    Budget.MAX: PROJECTION_BUDGET_MAX_BYTES,
}

Mode = Literal["verbatim", "head_tail", "reference_only", "withheld", "degraded"]


@dataclass(frozen=True)
class Projection:
    """What the primary sees automatically; `text` is at most the budget in UTF-8 bytes."""

    mode: Mode
    fidelity: FidelityClass
    budget: Budget
    text: str
    total_bytes: int
    head_bytes: int
    tail_bytes: int
    ref: ArtifactRef | None
    reason: str | None = None

    @property
    def omitted_bytes(self) -> int:
        """Bytes of the stored output not shown."""
        if self.mode == "verbatim":
            return 0
        return max(0, self.total_bytes - self.head_bytes - self.tail_bytes)

    def to_dict(self) -> dict[str, object]:
        """JSON form (the text included: it is what the primary receives anyway)."""
        return {
            "mode": self.mode,
            "fidelity": self.fidelity.value,
            "budget": self.budget.value,
            "budget_bytes": self.budget.bytes,
            "text": self.text,
            "total_bytes": self.total_bytes,
            "head_bytes": self.head_bytes,
            "tail_bytes": self.tail_bytes,
            "omitted_bytes": self.omitted_bytes,
            "ref": None if self.ref is None else self.ref.model_dump(mode="json"),
            "reason": self.reason,
        }


def _utf8_prefix(data: bytes, n: int) -> bytes:
    """The longest prefix of at most `n` bytes that does not split a UTF-8 sequence."""
    cut = min(n, len(data))
    while 0 < cut < len(data) and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut]


def _utf8_suffix(data: bytes, n: int) -> bytes:
    """The longest suffix of at most `n` bytes that starts on a UTF-8 boundary."""
    start = max(0, len(data) - n)
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:]


def _line_head(data: bytes, n: int) -> bytes:
    head = _utf8_prefix(data, n)
    nl = head.rfind(b"\n")
    return head[: nl + 1] if nl >= len(head) // 2 else head


def _line_tail(data: bytes, n: int) -> bytes:
    tail = _utf8_suffix(data, n)
    nl = tail.find(b"\n")
    return tail[nl + 1 :] if 0 <= nl < len(tail) // 2 else tail


def _ref_line(ref: ArtifactRef) -> str:
    state = f", truncated from {ref.original_size} bytes" if ref.state.value == "truncated" else ""
    return f"artifact {ref.id} ({ref.size} bytes{state}, sha256 {ref.sha256[:16]}…)"


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _reference_only(
    ref: ArtifactRef, data: bytes, fidelity: FidelityClass, budget: Budget, why: str
) -> Projection:
    text = (
        f"[ivoai: {fidelity.value} output not shown ({why}); {_ref_line(ref)}; "
        f"read the exact bytes with {READ_TOOLS}]"
    )
    return Projection("reference_only", fidelity, budget, text, len(data), 0, 0, ref, why)


def project(ref: ArtifactRef, data: bytes, *, fidelity: FidelityClass, budget: Budget) -> Projection:
    """Project the stored bytes `data` of `ref` into at most `budget.bytes` of text; deterministic.

    Raises:
        ValueError: `data` is not the stored payload of `ref` (its size differs).
    """
    if len(data) != ref.size:
        raise ValueError("project() needs the exact stored bytes of the ref")
    limit = budget.bytes
    text_ok = _is_text(data)
    if fidelity is not FidelityClass.COMPRESSIBLE:
        if fidelity is FidelityClass.UNSUPPORTED:
            return _reference_only(ref, data, fidelity, budget, "payload type has no text projection")
        if not text_ok:
            return _reference_only(ref, data, fidelity, budget, "not valid UTF-8; never altered")
        if len(data) <= limit:
            return Projection(
                "verbatim", fidelity, budget, data.decode("utf-8"), len(data), len(data), 0, ref
            )
        return _reference_only(
            ref, data, fidelity, budget, f"{len(data)} bytes exceed the {limit}-byte budget"
        )
    if len(data) <= limit and text_ok:
        return Projection("verbatim", fidelity, budget, data.decode("utf-8"), len(data), len(data), 0, ref)
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    header = (
        f"[ivoai: {len(data)} bytes, {lines} lines; head and tail shown; "
        f"full output: {_ref_line(ref)}; {READ_TOOLS}]\n"
    )
    # Reserve room for the header and the omission marker (its number has at most 8 digits).
    room = limit - len(header.encode("utf-8")) - len(_OMIT.format(n=10**8).encode("utf-8"))
    head_room = room // 2
    head = _line_head(data, head_room)
    tail = _line_tail(data[len(head) :], room - len(head))
    head_text = head.decode("utf-8", errors="replace")
    tail_text = tail.decode("utf-8", errors="replace")
    # A replacement character is 3 bytes for each bad byte: shrink until the text fits.
    while len((header + head_text + tail_text).encode("utf-8")) > room + len(header.encode("utf-8")):
        head = _utf8_prefix(head, max(0, len(head) - 64))
        tail = _utf8_suffix(tail, max(0, len(tail) - 64))
        head_text = head.decode("utf-8", errors="replace")
        tail_text = tail.decode("utf-8", errors="replace")
    omitted = len(data) - len(head) - len(tail)
    text = header + head_text + _OMIT.format(n=omitted) + tail_text
    return Projection("head_tail", fidelity, budget, text, len(data), len(head), len(tail), ref)


@dataclass(frozen=True)
class Capture:
    """The outcome of capturing one output: a ResultRef (when stored) and the bounded projection."""

    result_ref: ResultRef | None
    projection: Projection

    @property
    def degraded(self) -> bool:
        """True when the store failed and only a size note reached the primary."""
        return self.projection.mode == "degraded"


def capture(
    store: ArtifactStore,
    data: Source,
    *,
    session_id: str,
    payload_type: str,
    role: EvidenceRole = EvidenceRole.OUTPUT,
    task_id: str | None = None,
    worker_id: str | None = None,
    association_id: str | None = None,
    media_type: str = DEFAULT_MEDIA_TYPE,
    sensitivity: Sensitivity = Sensitivity.INTERNAL,
    failed: bool = False,
    cancelled: bool = False,
    suggested: FidelityClass | None = None,
    budget: Budget = Budget.BALANCED,
    ttl_seconds: int | None = None,
) -> Capture:
    """Persist `data` (bytes or a binary stream) exactly, then project it within `budget`.

    Raw output is never used as a fallback: a store failure gives a `degraded` note with sizes only.

    Raises:
        ValidationError: invalid owner IDs, types or TTL (caller bugs, not store failures).
    """
    fidelity = classify(payload_type, failed=failed, cancelled=cancelled, suggested=suggested)
    # A stream's size is unknown until the store has read it; a failure reports 0 shown bytes then.
    size = len(data) if isinstance(data, bytes | bytearray | memoryview) else 0
    what = f"{size} bytes of output" if isinstance(data, bytes | bytearray | memoryview) else "the output"
    try:
        ref, stored = store.put_kept(
            data,
            session_id=session_id,
            task_id=task_id,
            worker_id=worker_id,
            media_type=media_type,
            payload_type=payload_type,
            sensitivity=sensitivity,
            ttl_seconds=ttl_seconds,
        )
    except ArtifactRefusedError as exc:
        note = f"[ivoai: output withheld: {exc.message}; {what} was not stored and is not shown]"
        return Capture(None, Projection("withheld", fidelity, budget, note, size, 0, 0, None, exc.code))
    except IvoaiError as exc:
        if exc.code in ("usage", "invalid") or exc.code.startswith("artifact_invalid"):
            raise
        # The note reaches the model: name the store, not its path on this machine.
        message = redact(exc.message).replace(str(store.root), "<working-context>")
        return Capture(None, _degraded(fidelity, budget, size, what, f"{exc.code}: {message}"))
    except OSError as exc:
        return Capture(None, _degraded(fidelity, budget, size, what, f"os_error: {exc.errno}"))
    result_ref = ResultRef(ref=ref, role=role, association_id=association_id)
    return Capture(result_ref, project(ref, stored, fidelity=fidelity, budget=budget))


def _degraded(fidelity: FidelityClass, budget: Budget, size: int, what: str, reason: str) -> Projection:
    reason = reason[:300]
    note = (
        f"[ivoai: WorkingContext degraded ({reason}); {what} was not stored and is not shown; "
        "the exact evidence of this execution is unavailable]"
    )
    return Projection("degraded", fidelity, budget, note[: budget.bytes], size, 0, 0, None, reason)
