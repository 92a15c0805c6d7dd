"""The memory tools' argument models: one check per field, raised as the memory error callers know."""

from __future__ import annotations

import pydantic
import pytest

from ivoai.common.limits import MEMORY_HOOK_BATCH_MAX_EVENTS, MEMORY_QUERY_MAX_CHARS, MEMORY_QUERY_MAX_RESULTS
from ivoai.server.memory.arguments import DeleteArgs, HookBatchArgs, QueryArgs, WriteArgs
from ivoai.server.memory.errors import (
    MemoryConfirmError,
    MemoryNameError,
    MemoryTooLargeError,
    MemoryValidationError,
)


def test_the_first_bad_field_in_tool_order_is_reported_as_a_memory_error_not_a_pydantic_report() -> None:
    with pytest.raises(MemoryNameError, match="workspace"):
        QueryArgs(workspace="Bad Name", project="p", limit=0, text=1)  # type: ignore[arg-type]
    with pytest.raises(
        MemoryValidationError, match=f"limit must be an integer from 1 to {MEMORY_QUERY_MAX_RESULTS}"
    ):
        QueryArgs(workspace="w", project="p", limit=0, text=1)  # type: ignore[arg-type]


def test_a_boolean_is_not_a_limit_and_an_over_long_query_names_its_limit() -> None:
    with pytest.raises(MemoryValidationError, match="got True"):
        QueryArgs(workspace="w", project="p", limit=True, text="x")
    with pytest.raises(MemoryTooLargeError, match=f"the limit is {MEMORY_QUERY_MAX_CHARS}"):
        QueryArgs(workspace="w", project="p", limit=5, text="x" * (MEMORY_QUERY_MAX_CHARS + 1))
    with pytest.raises(
        pydantic.ValidationError
    ):  # a missing field stays pydantic's (callers always pass all)
        QueryArgs.model_validate({"workspace": "w"})


def test_values_come_out_normalized_and_frontmatter_parsed() -> None:
    args = WriteArgs.model_validate(
        {"workspace": "w", "project": "p", "path": "./notes//a", "body": "b", "frontmatter": {"tags": ["x"]}}
    )
    assert (args.path, args.frontmatter and args.frontmatter.tags, args.expected_version) == (
        "notes/a.md",
        ["x"],
        None,
    )
    with pytest.raises(MemoryValidationError, match="expected_version must be a non-negative integer"):
        WriteArgs.model_validate(
            {"workspace": "w", "project": "p", "path": "a", "body": "b", "expected_version": -1}
        )


def test_confirm_is_compared_with_the_normalized_path() -> None:
    assert DeleteArgs(workspace="w", project="p", path="./a", confirm="a.md").confirm == "a.md"
    with pytest.raises(MemoryConfirmError, match="'a.md'"):
        DeleteArgs(workspace="w", project="p", path="./a", confirm="./a")


def test_a_hook_batch_is_a_list_a_mapping_with_events_or_nothing_else() -> None:
    assert list(HookBatchArgs.model_validate({"events": [{"x": 1}]}).events) == [{"x": 1}]
    assert list(HookBatchArgs.model_validate({"events": {"events": [1, 2]}}).events) == [1, 2]
    with pytest.raises(MemoryValidationError, match="'events' must be a list"):
        HookBatchArgs.model_validate({"events": "not a list"})
    with pytest.raises(MemoryValidationError, match=f"it must have 1 to {MEMORY_HOOK_BATCH_MAX_EVENTS}"):
        HookBatchArgs.model_validate({"events": []})
