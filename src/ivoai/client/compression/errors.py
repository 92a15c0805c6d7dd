"""Errors of the compression layer; each carries a stable code."""

from __future__ import annotations

from ivoai.common.errors import IvoaiError, ValidationError


class CompressionSettingError(ValidationError):
    """`compression.provider` / `compression.source` in config.toml hold an invalid value."""

    code = "compression_setting_invalid"


class PreflightError(IvoaiError):
    """A provider's preflight failed; the launcher selects Direct with this code as the reason."""

    code = "preflight_failed"

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message, code=code)
