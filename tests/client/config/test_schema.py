"""The `schema` number of config.toml, secrets.json and the ownership manifest: one check, each
file's own error for a malformed number, and a newer file refused unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from ivoai.client.config.errors import ConfigSchemaError, OwnershipError, SecretsError
from ivoai.client.config.schema import check_file_schema

PATH = Path("/home/u/.local/state/ivoai/secrets.json")


@pytest.mark.parametrize("value", [True, False, 0, -1, "1", 1.0, None])
def test_a_schema_that_is_not_a_positive_integer_is_the_files_own_error(value: object) -> None:
    with pytest.raises(SecretsError) as info:
        check_file_schema(PATH, value, 1, SecretsError)
    assert info.value.message == f"{PATH}: `schema` must be a positive integer"
    with pytest.raises(OwnershipError):
        check_file_schema(PATH, value, 1, OwnershipError)


def test_a_newer_schema_fails_closed_naming_both_versions() -> None:
    with pytest.raises(ConfigSchemaError) as info:
        check_file_schema(PATH, 3, 2, SecretsError)
    assert info.value.message == (
        f"{PATH} has schema 3, newer than this ivoai understands (2); "
        "upgrade ivoai (the file was not changed)"
    )
    assert info.value.code == "schema_too_new"


def test_a_known_schema_is_returned() -> None:
    assert [check_file_schema(PATH, v, 2, SecretsError) for v in (1, 2)] == [1, 2]
