"""The memory tools' arguments as pydantic models: each check written once, for every caller.

`MemoryService` parses its arguments with these models whether they come from an MCP tool, an HTTP
hook post or Python; the MCP tools declare their input schema with the `Mcp*` types below (the SDK
builds the JSON schema and a first type check from them), and the service's models then apply the
domain rules. Fields are checked in declaration order and the first failure is raised as the memory
error the service has always raised (its code, and a message naming the field and the limit):
validators raise `MemoryValidationError`/`MemoryTooLargeError` themselves, which pydantic lets
through unchanged, instead of pydantic's own report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationInfo

from ivoai.common.limits import (
    MEMORY_BODY_MAX_BYTES,
    MEMORY_FEEDBACK_NOTE_MAX_CHARS,
    MEMORY_HOOK_BATCH_MAX_EVENTS,
    MEMORY_QUERY_MAX_CHARS,
    MEMORY_QUERY_MAX_RESULTS,
    MEMORY_RECENT_MAX_RESULTS,
)
from ivoai.common.validate import is_int
from ivoai.server.memory._names import normalize_path, validate_project, validate_workspace
from ivoai.server.memory.errors import MemoryConfirmError, MemoryTooLargeError, MemoryValidationError
from ivoai.server.memory.hooks import HookBatch
from ivoai.server.memory.models import Frontmatter, parse_model

# ---------------------------------------------------------------------- MCP input schema types

McpLimit = Annotated[
    int, Field(ge=1, le=MEMORY_QUERY_MAX_RESULTS, description=f"1..{MEMORY_QUERY_MAX_RESULTS}")
]
McpWorkspace = Annotated[str, Field(description="Memory workspace (default: default).", max_length=64)]
McpProject = Annotated[
    str, Field(description="Memory project (default: default; _global is shared).", max_length=128)
]
McpPath = Annotated[str, Field(description="Relative page path such as decisions/auth.md.", max_length=512)]

# ------------------------------------------------------------------------------- field checks


def _limit(maximum: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if not is_int(value, 1, maximum):
            raise MemoryValidationError(f"limit must be an integer from 1 to {maximum}, got {value!r}")
        return value

    return check


def _query_text(value: Any) -> str:
    if not isinstance(value, str):
        raise MemoryValidationError("text must be a string")
    if len(value) > MEMORY_QUERY_MAX_CHARS:
        raise MemoryTooLargeError(f"query is {len(value)} characters; the limit is {MEMORY_QUERY_MAX_CHARS}")
    return value


def _body(value: Any) -> str:
    if not isinstance(value, str):
        raise MemoryValidationError("body must be a string")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MEMORY_BODY_MAX_BYTES:
        raise MemoryTooLargeError(f"body is {size} bytes; the limit is {MEMORY_BODY_MAX_BYTES} bytes (1 MiB)")
    if "\x00" in value:
        raise MemoryValidationError("body must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise MemoryValidationError("body is not valid Unicode (lone surrogate)") from None
    return value


def _frontmatter(value: Any) -> Frontmatter | None:
    return None if value is None else parse_model(Frontmatter, value, what="frontmatter")


def _version(value: Any) -> int | None:
    if value is not None and not is_int(value, 1):
        raise MemoryValidationError(f"version must be a positive integer, got {value!r}")
    return value


def _expected_version(value: Any) -> int | None:
    if value is not None and not is_int(value, 0):
        raise MemoryValidationError(f"expected_version must be a non-negative integer, got {value!r}")
    return value


def _useful(value: Any) -> bool:
    if not isinstance(value, bool):
        raise MemoryValidationError("useful must be true or false")
    return value


def _note(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise MemoryValidationError("note must be a string")
    if len(value) > MEMORY_FEEDBACK_NOTE_MAX_CHARS:
        raise MemoryTooLargeError(
            f"note is {len(value)} characters; the limit is {MEMORY_FEEDBACK_NOTE_MAX_CHARS}"
        )
    return value


def _confirm(value: Any, info: ValidationInfo) -> str:
    path = info.data["path"]
    if not isinstance(value, str) or value != path:
        raise MemoryConfirmError(f"confirm must equal the normalized path {path!r}")
    return value


def _events(value: Any) -> Sequence[Any]:
    if isinstance(value, HookBatch):
        raw: Any = value.events
    else:
        raw = value.get("events") if isinstance(value, Mapping) else value
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        raise MemoryValidationError("hook batch field 'events' must be a list")
    if not 1 <= len(raw) <= MEMORY_HOOK_BATCH_MAX_EVENTS:
        raise MemoryValidationError(
            f"hook batch field 'events' has {len(raw)} events; "
            f"it must have 1 to {MEMORY_HOOK_BATCH_MAX_EVENTS}"
        )
    return raw


Workspace = Annotated[str, PlainValidator(validate_workspace)]
Project = Annotated[str, PlainValidator(validate_project)]
PagePath = Annotated[str, PlainValidator(normalize_path)]

# ------------------------------------------------------------------------------------ models


class _Arguments(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)


class QueryArgs(_Arguments):
    """`memory_query`: the scope, how many hits, and the words to rank by."""

    workspace: Workspace
    project: Project
    limit: Annotated[int, PlainValidator(_limit(MEMORY_QUERY_MAX_RESULTS))]
    text: Annotated[str, PlainValidator(_query_text)]


class RecentArgs(_Arguments):
    """`memory_recent`: the scope and how many pages."""

    workspace: Workspace
    project: Project
    limit: Annotated[int, PlainValidator(_limit(MEMORY_RECENT_MAX_RESULTS))]


class PageArgs(_Arguments):
    """One page: its scope and normalized path."""

    workspace: Workspace
    project: Project
    path: PagePath


class ReadArgs(PageArgs):
    """`memory_read_page`: a page and, optionally, an older version of it."""

    version: Annotated[int | None, PlainValidator(_version)] = None


class WriteArgs(PageArgs):
    """`memory_write_page`: the new body, its metadata (None: keep) and the version it replaces."""

    body: Annotated[str, PlainValidator(_body)]
    frontmatter: Annotated[Frontmatter | None, PlainValidator(_frontmatter)] = None
    expected_version: Annotated[int | None, PlainValidator(_expected_version)] = None


class FeedbackArgs(PageArgs):
    """`memory_feedback`: a verdict on a page and an optional note (redacted by the service)."""

    useful: Annotated[bool, PlainValidator(_useful)]
    note: Annotated[str | None, PlainValidator(_note)] = None


class DeleteArgs(PageArgs):
    """`memory_delete_page`: a page and `confirm`, which must repeat its normalized path."""

    confirm: Annotated[str, PlainValidator(_confirm)]


class HookBatchArgs(_Arguments):
    """A hook batch as posted: a `HookBatch`, `{"events": [...]}` or the list itself (1..N events).

    The events themselves are parsed one by one by the service, so one bad event is rejected alone.
    """

    events: Annotated[Sequence[Any], PlainValidator(_events)]
