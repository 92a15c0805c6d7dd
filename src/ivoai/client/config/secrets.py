"""The client secrets store: `$XDG_CONFIG_HOME/ivoai/secrets.json` (0600 inside the 0700 config dir).

Secrets are keyed by opaque IDs (`new_secret_id("prof")` -> `prof_<32 hex>`), never by a URL or an
alias. Every mutation takes an advisory lock, re-reads the file, and publishes the whole file by
atomic replacement, so concurrent processes never lose each other's entries. Values never appear
in repr, errors or logs.

File format (schema 1)::

    {"schema": 1, "secrets": {"prof_3f9c...": "value", ...}}
"""

from __future__ import annotations

import json
import re
from contextlib import AbstractContextManager

from ivoai.client.config.errors import SecretsError
from ivoai.client.config.schema import check_file_schema
from ivoai.common.fsio import atomic_write, file_lock, read_private_file_or_none, remove_stale_staging
from ivoai.common.ids import random_id
from ivoai.common.jsonio import dumps_bytes
from ivoai.common.limits import (
    SECRET_ID_MAX_CHARS,
    SECRET_VALUE_MAX_BYTES,
    SECRETS_MAX_BYTES,
    SECRETS_MAX_ENTRIES,
)
from ivoai.common.paths import XdgPaths

SECRETS_SCHEMA_VERSION = 1

# prefix (lowercase letters/digits, <= 16) + "_" + opaque body (letters, digits, "_" or "-", 8..64).
SECRET_ID_PATTERN = re.compile(r"[a-z][a-z0-9]{0,15}_[A-Za-z0-9_-]{8,64}")


def new_secret_id(prefix: str) -> str:
    """A fresh random secret ID such as `prof_3f9c…` (prefix: 1-16 lowercase letters/digits)."""
    secret_id = random_id(prefix)
    validate_secret_id(secret_id)
    return secret_id


def validate_secret_id(secret_id: str) -> str:
    """Return `secret_id` if it matches SECRET_ID_PATTERN.

    Raises:
        SecretsError: it does not (the message names the pattern, not the input).
    """
    if (
        not isinstance(secret_id, str)
        or len(secret_id) > SECRET_ID_MAX_CHARS
        or not SECRET_ID_PATTERN.fullmatch(secret_id)
    ):
        raise SecretsError(f"invalid secret ID; expected an opaque ID matching {SECRET_ID_PATTERN.pattern}")
    return secret_id


def _validate_value(value: str) -> None:
    if not isinstance(value, str) or not value:
        raise SecretsError("a secret value must be a non-empty string")
    if len(value.encode("utf-8")) > SECRET_VALUE_MAX_BYTES:
        raise SecretsError(f"a secret value exceeds the limit of {SECRET_VALUE_MAX_BYTES} bytes")


class SecretsStore:
    """Opaque-ID -> secret string, persisted privately; safe across processes."""

    def __init__(self, paths: XdgPaths) -> None:
        self._paths = paths

    def __repr__(self) -> str:
        return f"SecretsStore({str(self._paths.secrets_file)!r})"

    @property
    def path(self) -> str:
        return str(self._paths.secrets_file)

    def _locked(self) -> AbstractContextManager[None]:
        return file_lock(self._paths.config, self._paths.config / ".secrets.json.lock")

    def _read(self) -> dict[str, str]:
        path = self._paths.secrets_file
        raw = read_private_file_or_none(self._paths.config, path, SECRETS_MAX_BYTES)
        if raw is None:
            return {}
        try:
            doc = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise SecretsError(f"{path} is not UTF-8; restore it from a backup or delete it") from None
        except json.JSONDecodeError as exc:
            raise SecretsError(
                f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}; restore it or delete it"
            ) from None
        if not isinstance(doc, dict):
            raise SecretsError(f"{path}: expected a JSON object at the top level")
        check_file_schema(path, doc.get("schema"), SECRETS_SCHEMA_VERSION, SecretsError)
        entries = doc.get("secrets")
        if not isinstance(entries, dict):
            raise SecretsError(f"{path}: `secrets` must be an object")
        out: dict[str, str] = {}
        for key, value in entries.items():
            if (
                not isinstance(key, str)
                or not SECRET_ID_PATTERN.fullmatch(key)
                or len(key) > SECRET_ID_MAX_CHARS
            ):
                raise SecretsError(f"{path}: an entry has an invalid secret ID")
            if not isinstance(value, str) or not value:
                raise SecretsError(f"{path}: the entry {key} does not hold a non-empty string")
            out[key] = value
        return out

    def _write(self, entries: dict[str, str]) -> None:
        remove_stale_staging(self._paths.config, self._paths.secrets_file)
        doc = {"schema": SECRETS_SCHEMA_VERSION, "secrets": entries}
        atomic_write(self._paths.config, self._paths.secrets_file, dumps_bytes(doc))

    def put(self, secret_id: str, value: str) -> None:
        """Store (or replace) the secret under `secret_id`.

        Raises:
            SecretsError: invalid ID or value, or the store is full.
            UnsafePathError: the config directory or secrets.json is unsafe (symlink, mode, owner).
            LockTimeoutError: another process held the store's lock too long.
        """
        validate_secret_id(secret_id)
        _validate_value(value)
        with self._locked():
            entries = self._read()
            if secret_id not in entries and len(entries) >= SECRETS_MAX_ENTRIES:
                raise SecretsError(f"the secrets store is full ({SECRETS_MAX_ENTRIES} entries)")
            entries[secret_id] = value
            self._write(entries)

    def get(self, secret_id: str) -> str | None:
        """The secret stored under `secret_id`, or None."""
        validate_secret_id(secret_id)
        return self._read().get(secret_id)

    def delete(self, secret_id: str) -> bool:
        """Remove `secret_id`; True if it existed."""
        validate_secret_id(secret_id)
        with self._locked():
            entries = self._read()
            if secret_id not in entries:
                return False
            del entries[secret_id]
            self._write(entries)
            return True

    def ids(self) -> list[str]:
        """Sorted IDs of the stored secrets (never the values)."""
        return sorted(self._read())
