"""The top-level `schema` number of a client state file: one check for config.toml, secrets.json
and the ownership manifest (import-light: the launch path reads config.toml)."""

from __future__ import annotations

from pathlib import Path

from ivoai.client.config.errors import ConfigSchemaError
from ivoai.common.errors import ValidationError
from ivoai.common.validate import is_int


def check_file_schema(path: Path, value: object, latest: int, invalid: type[ValidationError]) -> int:
    """Return `value` when it is a positive integer no newer than `latest`.

    A file from a newer ivoai fails closed: the caller leaves it unchanged.

    Raises:
        invalid: `value` is not a positive integer (the message names the file and `schema`).
        ConfigSchemaError: `value` is newer than `latest`.
    """
    if not is_int(value, 1):
        raise invalid(f"{path}: `schema` must be a positive integer")
    if value > latest:
        raise ConfigSchemaError(
            f"{path} has schema {value}, newer than this ivoai understands ({latest}); "
            "upgrade ivoai (the file was not changed)"
        )
    return value
