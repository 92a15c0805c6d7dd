"""Stable JSON rendering shared by `--json` outputs and state files."""

from __future__ import annotations

import json
from typing import Any


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """Deterministic JSON: sorted keys, UTF-8 kept, no NaN."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False, indent=indent)


def dumps_bytes(obj: Any) -> bytes:
    return (dumps(obj, indent=2) + "\n").encode("utf-8")
