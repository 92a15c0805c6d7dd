"""Errors of the client config domain (config.toml, secrets.json, ownership manifest)."""

from __future__ import annotations

from ivoai.common.errors import ConflictError, UsageError, ValidationError


class ConfigError(ValidationError):
    """config.toml cannot be parsed or holds an invalid value; the message names file and line or key."""

    code = "config_invalid"


class ConfigSchemaError(ValidationError):
    """A state file was written by a newer ivoai than this one (fail closed)."""

    code = "schema_too_new"


class UnknownConfigKeyError(UsageError):
    """`config set` named a key ivoai does not know; the message lists the valid ones."""

    code = "config_unknown_key"


class SecretsError(ValidationError):
    """secrets.json is malformed or a secret ID/value is invalid (never echoes a value)."""

    code = "secrets_invalid"


class OwnershipError(ValidationError):
    """The ownership manifest is malformed or an entry is invalid."""

    code = "ownership_invalid"


class OwnershipConflictError(ConflictError):
    """An entry would change who owns a path (e.g. claim a pre-existing executable as managed)."""

    code = "ownership_conflict"
