"""Memory service: durable, versioned Markdown pages for agents, with ranking and hook intake.

The gateway calls `MemoryService` (see docs/memory.md); everything here is transport-free.
"""

from ivoai.server.memory._names import DEFAULT_PROJECT, DEFAULT_WORKSPACE, GLOBAL_PROJECT
from ivoai.server.memory.errors import (
    MemoryBusyError,
    MemoryClosedError,
    MemoryConfirmError,
    MemoryConflictError,
    MemoryNameError,
    MemoryNotFoundError,
    MemoryPathError,
    MemorySchemaError,
    MemoryStoreError,
    MemoryTooLargeError,
    MemoryValidationError,
)
from ivoai.server.memory.hooks import HookBatch, HookBatchResult, HookEvent, HookResult
from ivoai.server.memory.models import (
    DeleteResult,
    FeedbackResult,
    Frontmatter,
    Page,
    PageSummary,
    QueryHit,
    QueryResult,
    RecentResult,
    StatusResult,
    WriteResult,
)
from ivoai.server.memory.service import MemoryService

__all__ = [
    "DEFAULT_PROJECT",
    "DEFAULT_WORKSPACE",
    "GLOBAL_PROJECT",
    "DeleteResult",
    "FeedbackResult",
    "Frontmatter",
    "HookBatch",
    "HookBatchResult",
    "HookEvent",
    "HookResult",
    "MemoryBusyError",
    "MemoryClosedError",
    "MemoryConfirmError",
    "MemoryConflictError",
    "MemoryNameError",
    "MemoryNotFoundError",
    "MemoryPathError",
    "MemorySchemaError",
    "MemoryService",
    "MemoryStoreError",
    "MemoryTooLargeError",
    "MemoryValidationError",
    "Page",
    "PageSummary",
    "QueryHit",
    "QueryResult",
    "RecentResult",
    "StatusResult",
    "WriteResult",
]
