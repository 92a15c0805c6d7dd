"""Read config.toml with the stdlib `tomllib` only: the launch path uses this and must stay import-light.

No tomlkit, no pydantic here (a test pins that). The returned dict is the raw document; callers
that need validated values use `ivoai.client.config.store.load_config`.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from ivoai.client.config.errors import ConfigError
from ivoai.client.config.keys import CONFIG_SCHEMA_VERSION, KNOWN_KEYS, value_problems
from ivoai.client.config.schema import check_file_schema
from ivoai.common.fsio import read_private_file_or_none
from ivoai.common.limits import CONFIG_MAX_BYTES
from ivoai.common.paths import XdgPaths, xdg_paths

_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


def toml_error(path: Path, reason: str, line: int | None, col: int | None) -> ConfigError:
    """A ConfigError naming the file and line, with the parser's reason (never the offending text)."""
    if line is None:
        where = "end of document"
    elif col is None:
        where = f"line {line} (end of document)"
    else:
        where = f"line {line}, column {col}"
    return ConfigError(
        f"{path}: invalid TOML at {where}: {reason}; the file was left untouched, fix it by hand"
    )


def decode_config_bytes(path: Path, raw: bytes) -> str:
    """UTF-8 decode with an error naming the file and the line of the first bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: invalid UTF-8 at line {line}; the file was left untouched") from None


def check_schema(path: Path, value: object) -> int:
    """Validate the top-level `schema` value; a newer schema than this code knows fails closed."""
    if value is None:
        return CONFIG_SCHEMA_VERSION
    return check_file_schema(path, value, CONFIG_SCHEMA_VERSION, ConfigError)


def known_value_error(path: Path, problems: list[tuple[str, str]]) -> ConfigError:
    """One error naming the file, each bad key with its allowed values, and the fix."""
    keys = [key for key, _ in problems]
    if len(keys) == 1 and keys[0] in KNOWN_KEYS:
        fix = f"fix: ivoai config set {keys[0]} VALUE"
    elif all(key in KNOWN_KEYS for key in keys):
        fix = "fix: ivoai config set KEY VALUE for each"
    else:
        fix = "fix it in the file"
    return ConfigError(f"{path}: {'; '.join(why for _, why in problems)} ({fix})")


def check_known_values(path: Path, data: dict[str, Any]) -> None:
    """Refuse a document whose known keys hold values ivoai does not accept (file, key and choices named).

    Raises:
        ConfigError: e.g. `PATH: compression.provider must be one of: caveman, headroom, direct (fix: …)`.
    """
    problems = value_problems(data)
    if problems:
        raise known_value_error(path, problems)


def parse_config_text(path: Path, text: str, *, check_values: bool = True) -> dict[str, Any]:
    """Parse TOML text with tomllib; errors name the file and line (or the key with a bad value).

    `check_values=False` skips the check of known keys' values (a writer about to replace one).
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _AT.search(message)
        if match:
            raise toml_error(
                path, message[: match.start()], int(match.group(1)), int(match.group(2))
            ) from None
        # "at end of document": the error is on the last line (an unterminated string, array, table).
        last = max(len(text.splitlines()), 1)
        raise toml_error(path, message.replace("(at end of document)", "").strip(), last, None) from None
    check_schema(path, data.get("schema"))
    if check_values:
        check_known_values(path, data)
    return data


def read_config_fast(paths: XdgPaths | None = None) -> dict[str, Any]:
    """The raw config.toml as a dict ({} when absent), read safely and schema-checked.

    Raises:
        ConfigError: the file is not valid TOML (message names file and line).
        ConfigSchemaError: the file has a newer schema.
        UnsafePathError: the file or its directory is a symlink, foreign-owned or has a loose mode.
        TooLargeError: the file exceeds CONFIG_MAX_BYTES.
    """
    paths = paths or xdg_paths()
    raw = read_private_file_or_none(paths.config, paths.config_file, CONFIG_MAX_BYTES)
    if raw is None:
        return {}
    return parse_config_text(paths.config_file, decode_config_bytes(paths.config_file, raw))
