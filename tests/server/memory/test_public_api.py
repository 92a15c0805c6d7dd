"""The package's public names and the gateway contract's signatures."""

from __future__ import annotations

import inspect

import ivoai.server.memory as memory
from ivoai.common.errors import ConflictError, IvoaiError
from ivoai.server.memory import MemoryService


def test_the_public_names_are_pinned_and_sorted() -> None:
    assert memory.__all__ == sorted(memory.__all__, key=lambda n: (not n.isupper(), n))
    assert all(hasattr(memory, name) for name in memory.__all__)


def test_the_tool_methods_keep_the_gateway_contract() -> None:
    expected = {
        "memory_query": ["text", "workspace", "project", "limit", "include_global"],
        "memory_recent": ["workspace", "project", "limit"],
        "memory_read_page": ["workspace", "project", "path", "version"],
        "memory_write_page": ["workspace", "project", "path", "body", "frontmatter", "expected_version"],
        "memory_feedback": ["workspace", "project", "path", "useful", "note"],
        "memory_delete_page": ["workspace", "project", "path", "confirm"],
        "memory_status": [],
        "hook_event": ["event"],
        "hook_batch": ["events"],
    }
    for name, params in expected.items():
        signature = inspect.signature(getattr(MemoryService, name))
        assert list(signature.parameters)[1:] == params, name
    query = inspect.signature(MemoryService.memory_query).parameters
    assert (query["workspace"].default, query["project"].default, query["limit"].default) == (
        "default",
        "default",
        10,
    )
    assert query["include_global"].default is True


def test_every_error_has_a_stable_memory_code() -> None:
    errors = [getattr(memory, n) for n in memory.__all__ if n.endswith("Error")]
    assert all(issubclass(e, IvoaiError) and e.code.startswith("memory_") for e in errors)
    assert len({e.code for e in errors}) == len(errors)
    assert issubclass(memory.MemoryConflictError, ConflictError)
