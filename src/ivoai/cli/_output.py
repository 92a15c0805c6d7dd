"""Rendering helpers: tables on a TTY, plain text otherwise, `--json` for scripts, NO_COLOR honoured."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from ivoai.common.jsonio import dumps
from ivoai.common.redact import redact


def print_json(obj: Any) -> None:
    """One stable JSON document on stdout."""
    sys.stdout.write(dumps(obj, indent=2) + "\n")


def print_ndjson(obj: Any) -> None:
    sys.stdout.write(dumps(obj) + "\n")
    sys.stdout.flush()


def is_tty() -> bool:
    return sys.stdout.isatty()


def use_color() -> bool:
    return is_tty() and "NO_COLOR" not in os.environ


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A rich table on a TTY; tab-separated plain text otherwise."""
    materialized = [[redact("" if v is None else str(v)) for v in row] for row in rows]
    if is_tty():
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title=title)
        for col in columns:
            table.add_column(col)
        for row in materialized:
            # Text(), not str: a path or value containing "[x]" must not be read as rich markup.
            table.add_row(*(Text(cell) for cell in row))
        Console(no_color=not use_color()).print(table)
        return
    sys.stdout.write("\t".join(columns) + "\n")
    for row in materialized:
        sys.stdout.write("\t".join(row) + "\n")


def print_kv(pairs: Iterable[tuple[str, Any]]) -> None:
    for key, value in pairs:
        sys.stdout.write(f"{key}: {redact('' if value is None else str(value))}\n")


def info(message: str) -> None:
    """A human message on stderr (stdout stays clean for data)."""
    sys.stderr.write(redact(message) + "\n")


def minutes_seconds(seconds: float) -> str:
    """A duration rounded to the second: `42s`, or `3m05s` from one minute on."""
    minutes, secs = divmod(int(seconds + 0.5), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def print_result(doc: Any, json_out: bool, *messages: str) -> None:
    """A command's result: `doc` as JSON on stdout with `--json`, else the human `messages` on stderr."""
    if json_out:
        print_json(doc)
        return
    for message in messages:
        info(message)
