"""Errors of the knowledge plane; each carries a stable code."""

from __future__ import annotations

from ivoai.common.errors import IvoaiError, NotFoundError, UsageError


class KnowledgeError(IvoaiError):
    """A knowledge-router failure a user can act on."""

    code = "knowledge_error"


class UnknownSourceError(UsageError):
    """A `--knowledge-source` selector matches no enrolled source."""

    code = "unknown_knowledge_source"


class DisabledSourceError(UsageError):
    """A `--knowledge-source` selector matches only disabled sources."""

    code = "disabled_knowledge_source"


class NoSourcesError(NotFoundError):
    """There is nothing to route: no enabled knowledge source."""

    code = "no_knowledge_sources"
