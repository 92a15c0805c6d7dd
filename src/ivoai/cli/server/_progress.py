"""Ingest progress on stderr: rich bars on a terminal, plain lines otherwise (as pip and git do).

Phase 1 (lexical) counts documents indexed and chunks written; phase 2 (embed) counts chunks and
documents embedded, with chunks/s and the ETA once a batch has finished ("loading model" or
"embedding the first batch" before that: no rate is shown before one is measured).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ivoai.cli._output import info, minutes_seconds
from ivoai.common.limits import INGEST_PROGRESS_LINE_SECONDS

if TYPE_CHECKING:
    from ivoai.server.context.ingest import IngestProgress

Update = Callable[["IngestProgress"], None]
PHASE_LABEL = {
    "scan": "listing",
    "lexical": "indexing",
    "done": "indexed",
    "embed": "embedding",
    "embedded": "embedded",
}


def _rate(p: IngestProgress) -> str:
    rate = p.chunks_per_second
    if p.note:
        return p.note
    return "-" if rate is None else f"{rate:.1f} chunks/s"


def _eta(p: IngestProgress) -> str:
    eta = p.eta_seconds
    return "" if eta is None else f"ETA {minutes_seconds(eta)}"


def describe(p: IngestProgress) -> str:
    """One plain progress line."""
    label = f"{p.connector}: {PHASE_LABEL.get(p.phase, p.phase)}"
    if p.phase in ("embed", "embedded"):
        return (
            f"{label}  {p.chunks_done}/{p.chunks_total} chunks  {p.documents_done}/{p.documents_total} "
            f"documents  {_rate(p)}  {_eta(p)}".rstrip()
        )
    if p.phase == "scan":
        return f"{label} source files"
    return f"{label}  {p.documents_done}/{p.documents_total} documents  {p.chunks_done} chunks written"


def _plain() -> Update:
    last: dict[str, Any] = {"key": None, "at": 0.0}

    def update(p: IngestProgress) -> None:
        now = time.monotonic()
        key = (p.connector, p.phase, p.note)
        if key != last["key"] or now - last["at"] >= INGEST_PROGRESS_LINE_SECONDS:
            last["key"], last["at"] = key, now
            info(describe(p))

    return update


@contextmanager
def ingest_progress(enabled: bool) -> Iterator[Update | None]:
    """A progress callback for ingest/rebuild: rich bars on a terminal, plain lines otherwise."""
    if not enabled:
        yield None
        return
    if not sys.stderr.isatty():
        yield _plain()
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[counts]}"),
        TextColumn("{task.fields[rate]}"),
        TextColumn("{task.fields[eta]}"),
        console=Console(stderr=True),
        transient=False,
    ) as bar:
        tasks: dict[tuple[str, str], Any] = {}

        def update(p: IngestProgress) -> None:
            phase = "embed" if p.phase in ("embed", "embedded") else "lexical"
            key = (p.connector, phase)
            if key not in tasks:
                label = "embedding" if phase == "embed" else "indexing"
                tasks[key] = bar.add_task(f"{p.connector} {label}", total=None, counts="", rate="", eta="")
            if phase == "embed":
                total, done = max(p.chunks_total, 1), p.chunks_done
                counts = (
                    f"{p.chunks_done}/{p.chunks_total} chunks  {p.documents_done}/{p.documents_total} docs"
                )
                rate, eta = _rate(p), _eta(p)
            else:
                total, done = max(p.documents_total, 1), p.documents_done
                counts = f"{p.documents_done}/{p.documents_total} docs  {p.chunks_done} chunks"
                rate, eta = _rate(p), _eta(p)
            if p.phase == "scan":
                bar.update(tasks[key], total=None, counts="listing files", rate="", eta="")
                return
            if p.phase in ("done", "embedded"):
                done = total
            bar.update(tasks[key], total=total, completed=done, counts=counts, rate=rate, eta=eta)

        yield update
