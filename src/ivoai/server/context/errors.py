"""Errors of the context service; each carries a stable code the gateway and CLI pass on."""

from __future__ import annotations

from ivoai.common.errors import (
    ConflictError,
    IvoaiError,
    LockTimeoutError,
    NotFoundError,
    TooLargeError,
    ValidationError,
)


class ContextError(IvoaiError):
    """Base of context-service failures that are not one of the shared kinds below."""

    code = "context_error"


class ConnectorNotFoundError(NotFoundError):
    code = "connector_not_found"


class DocumentNotFoundError(NotFoundError):
    code = "document_not_found"


class ConnectorExistsError(ConflictError):
    code = "connector_exists"


class InvalidConnectorError(ValidationError):
    code = "invalid_connector"


class InvalidQueryError(ValidationError):
    code = "invalid_query"


class IngestRunningError(LockTimeoutError):
    code = "ingest_running"


class IndexBusyError(LockTimeoutError):
    code = "index_busy"


class QuotaExceededError(TooLargeError):
    code = "quota_exceeded"


class EmbedderError(ContextError):
    """The embedder failed or returned malformed vectors."""

    code = "embedder_failed"


class VectorIndexError(ContextError):
    """The vector index failed (open, write or query)."""

    code = "index_failed"


class SettingsError(ValidationError):
    code = "invalid_context_settings"


class CatalogSchemaError(ContextError):
    """The catalog was written by a newer ivoai (its schema version is beyond this code's)."""

    code = "catalog_schema_unsupported"
