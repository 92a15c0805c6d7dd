"""Fidelity classification of a payload: may a lossy provider touch it? (seed 000, seed 003).

Four provider-neutral classes, decided deterministically from the payload type alone, plus the
facts that the originating call failed or was cancelled and an optional caller suggestion:

- `compressible`: JSON, logs, code, diffs, search results and text. The only class a lossy
  compression provider (Caveman, Headroom) or the head/tail projector may shorten.
- `exact_required`: Memory/Context responses, Skill Registry metadata, security evidence, errors,
  stack traces, test/build failures and payloads that influence policy or authority. Never
  altered: shown verbatim or replaced by a reference.
- `bypass`: bounded structures ivoai itself produced (ResultRef, WorkerResult, tool calls and
  protocol control messages); passed through untouched, never sent to a provider.
- `unsupported`: binary media a text projection cannot represent (images, archives, octet
  streams); only their reference is ever shown.

Fail-safe rules, in order:

1. A type that is unknown, empty or malformed is `exact_required` (unknown favours fidelity).
2. Failure or cancellation turns a `compressible` result into `exact_required`.
3. A suggestion can only keep or raise fidelity: it is honoured when the base class is
   `compressible` and ignored otherwise (a suggestion never makes anything compressible).

Usage::

    from ivoai.client.compression.fidelity import FidelityClass, classify

    if classify("log", failed=exit_code != 0) is FidelityClass.COMPRESSIBLE:
        ...  # eligible for a provider
"""

from __future__ import annotations

import re
from enum import StrEnum

__all__ = [
    "COMPRESSIBLE_TYPES",
    "EXACT_REQUIRED_TYPES",
    "FidelityClass",
    "classify",
    "normalize_payload_type",
    "provider_eligible",
]


class FidelityClass(StrEnum):
    """How faithfully a payload must reach the model."""

    COMPRESSIBLE = "compressible"
    EXACT_REQUIRED = "exact_required"
    BYPASS = "bypass"
    UNSUPPORTED = "unsupported"


COMPRESSIBLE_TYPES: frozenset[str] = frozenset(
    {
        "json", "jsonl", "ndjson", "log", "logs", "stdout", "code", "source", "diff", "patch",
        "search_results", "search", "text", "markdown", "csv", "yaml", "toml", "xml", "html",
    }
)  # fmt: skip

EXACT_REQUIRED_TYPES: frozenset[str] = frozenset(
    {
        # authoritative knowledge
        "memory", "memory_response", "context", "context_response", "rag", "rag_response",
        "skill_registry", "skill_metadata", "skill",
        # security evidence and failures
        "security", "security_evidence", "audit", "vulnerability",
        "error", "errors", "stderr", "stack_trace", "stacktrace", "traceback", "exception", "panic",
        "test_failure", "test_failures", "build_failure", "build_error", "compile_error", "lint_failure",
        # anything that steers decisions
        "policy", "authority", "approval", "permission", "permissions", "config", "configuration",
        "state_delta",
    }
)  # fmt: skip

BYPASS_TYPES: frozenset[str] = frozenset(
    {"result_ref", "artifact_ref", "worker_result", "tool_call", "control", "handshake", "heartbeat"}
)

UNSUPPORTED_TYPES: frozenset[str] = frozenset(
    {"binary", "octet_stream", "image", "audio", "video", "archive", "pdf", "font", "executable"}
)

# Media types map onto payload types so a caller may pass either.
_MEDIA_ALIASES: dict[str, str] = {
    "application/json": "json",
    "application/x-ndjson": "ndjson",
    "application/jsonl": "jsonl",
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/csv": "csv",
    "text/html": "html",
    "text/x-diff": "diff",
    "text/x-patch": "patch",
    "application/x-yaml": "yaml",
    "application/yaml": "yaml",
    "application/toml": "toml",
    "application/xml": "xml",
    "text/xml": "xml",
    "application/octet-stream": "binary",
    "application/zip": "archive",
    "application/gzip": "archive",
    "application/x-tar": "archive",
    "application/pdf": "pdf",
}
_MEDIA_FAMILIES: dict[str, str] = {"image": "image", "audio": "audio", "video": "video", "font": "font"}

_TYPE_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_MEDIA_RE = re.compile(r"^([a-z0-9][a-z0-9!#$&^_.+-]{0,63})/([a-z0-9][a-z0-9!#$&^_.+-]{0,63})$")


def normalize_payload_type(payload_type: str) -> str | None:
    """Lower-case `payload_type`, fold `-`/`.`/spaces to `_`, map media types; None when malformed."""
    text = payload_type.strip().lower()
    base = text.split(";", 1)[0].strip()
    media = _MEDIA_RE.match(base)
    if media:
        if base in _MEDIA_ALIASES:
            return _MEDIA_ALIASES[base]
        family = _MEDIA_FAMILIES.get(media.group(1))
        if family:
            return family
        sub = media.group(2)
        if sub.endswith("+json"):
            return "json"
        if sub.endswith("+xml"):
            return "xml"
        return None
    folded = re.sub(r"[\s.\-]+", "_", text)
    return folded if _TYPE_RE.match(folded) else None


def _base_class(payload_type: str) -> FidelityClass:
    name = normalize_payload_type(payload_type)
    if name is None:
        return FidelityClass.EXACT_REQUIRED
    if name in EXACT_REQUIRED_TYPES:
        return FidelityClass.EXACT_REQUIRED
    if name in BYPASS_TYPES:
        return FidelityClass.BYPASS
    if name in UNSUPPORTED_TYPES:
        return FidelityClass.UNSUPPORTED
    if name in COMPRESSIBLE_TYPES:
        return FidelityClass.COMPRESSIBLE
    return FidelityClass.EXACT_REQUIRED


def classify(
    payload_type: str,
    *,
    failed: bool = False,
    cancelled: bool = False,
    suggested: FidelityClass | None = None,
) -> FidelityClass:
    """Classify one payload; deterministic, and never less faithful than the rules allow."""
    base = _base_class(payload_type)
    if base is not FidelityClass.COMPRESSIBLE:
        return base
    if failed or cancelled:
        return FidelityClass.EXACT_REQUIRED
    if suggested is not None:
        return FidelityClass(suggested)
    return base


def provider_eligible(fidelity: FidelityClass) -> bool:
    """Only `compressible` payloads may be handed to a compression provider or the head/tail projector."""
    return fidelity is FidelityClass.COMPRESSIBLE
