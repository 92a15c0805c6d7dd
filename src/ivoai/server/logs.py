"""The gateway's log: where it is written and how `ivoai server logs` reads it, always redacted.

A foreground `ivoai server start` writes `DATA/run/gateway.log` (0600, rotated at
`GATEWAY_LOG_MAX_BYTES`, `GATEWAY_LOG_BACKUPS` old files kept) besides stderr; every record passes
through the redactor before it is written. Under systemd (`INVOCATION_ID` is set) stdout and stderr
already go to journald, so no file is written and `logs` reads the journal of the ivoai units with
`journalctl`. Every line shown is redacted again on the way out (journald also holds lines written by
anything else in the unit).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ivoai.common.errors import ValidationError
from ivoai.common.fsio import ensure_private_dir
from ivoai.common.limits import GATEWAY_LOG_BACKUPS, GATEWAY_LOG_MAX_BYTES, LOG_FOLLOW_POLL_SECONDS
from ivoai.common.redact import redact
from ivoai.server.datadir import ServerDataDir

LOG_FILE = "gateway.log"
UNITS = ("ivoai-gateway.service", "ivoai-context.service")
UNIT_FILE = Path("/etc/systemd/system/ivoai-gateway.service")
_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z)")


class _Redacting(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        return True


class _UtcFormatter(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def log_path(data: ServerDataDir) -> Path:
    return data.run / LOG_FILE


def attach_log_file(data: ServerDataDir) -> logging.Handler | None:
    """Send INFO and above of ivoai and uvicorn to `DATA/run/gateway.log` (not under systemd)."""
    if os.environ.get("INVOCATION_ID"):
        return None
    ensure_private_dir(data.root, data.run)
    path = log_path(data)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.close(fd)
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=GATEWAY_LOG_MAX_BYTES, backupCount=GATEWAY_LOG_BACKUPS, encoding="utf-8"
    )
    handler.setLevel(logging.INFO)
    handler.addFilter(_Redacting())
    handler.setFormatter(_UtcFormatter("%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"))
    for name in ("", "uvicorn"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
    # With a handler on the root logger Python stops using its last-resort stderr handler: keep
    # warnings on stderr as before.
    console = logging.StreamHandler()
    console.setLevel(logging.WARNING)
    console.addFilter(_Redacting())
    logging.getLogger().addHandler(console)
    logging.getLogger("ivoai").setLevel(logging.INFO)
    return handler


def parse_since(value: str | None, now: datetime | None = None) -> datetime | None:
    """`90s`, `10m`, `2h`, `1d` ago, or an ISO-8601 time (naive = UTC).

    Raises:
        ValidationError: neither form.
    """
    if value is None:
        return None
    now = now or datetime.now(UTC)
    m = re.fullmatch(r"(\d+)([smhd])", value.strip())
    if m:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[m.group(2)]
        return now - timedelta(**{unit: int(m.group(1))})
    try:
        t = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(f"--since: expected 90s, 10m, 2h, 1d or an ISO time, got {value!r}") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def use_journal() -> bool:
    """True when the gateway is installed as units and journalctl can read them."""
    return UNIT_FILE.exists() and shutil.which("journalctl") is not None


def journal_lines(since: datetime | None, follow: bool) -> Iterator[str]:
    """Redacted lines of the ivoai units from journald."""
    argv = ["journalctl", "--no-pager", "-o", "short-iso-precise"]
    for unit in UNITS:
        argv += ["-u", unit]
    if since is not None:
        argv += ["--since", since.strftime("%Y-%m-%d %H:%M:%S UTC")]
    if follow:
        argv.append("--follow")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            yield redact(line.rstrip("\n"))
    finally:
        proc.terminate()
        proc.wait(5)
        proc.stdout.close()


def file_lines(
    data: ServerDataDir, since: datetime | None, follow: bool, *, stop: threading.Event | None = None
) -> Iterator[str]:
    """Redacted lines of the foreground log (rotated files first), optionally following new lines."""
    path = log_path(data)
    for n in range(GATEWAY_LOG_BACKUPS, 0, -1):
        old = path.with_name(f"{LOG_FILE}.{n}")
        if old.is_file():
            with open(old, encoding="utf-8", errors="replace") as f:
                yield from _filtered(f, since)
    if not path.is_file() and not follow:
        return
    while not path.is_file():
        if stop is not None and stop.wait(LOG_FOLLOW_POLL_SECONDS):
            return
        if stop is None:
            time.sleep(LOG_FOLLOW_POLL_SECONDS)
    f = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115 - reopened on rotation below
    try:
        yield from _filtered(f, since)
        if not follow:
            return
        inode = os.fstat(f.fileno()).st_ino
        pending = ""
        while stop is None or not stop.is_set():
            chunk = f.readline()
            if chunk:
                pending += chunk
                if pending.endswith("\n"):
                    yield redact(pending.rstrip("\n"))
                    pending = ""
                continue
            try:
                if os.stat(path).st_ino != inode:  # rotated: continue with the new file
                    f.close()
                    f = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
                    inode = os.fstat(f.fileno()).st_ino
                    continue
            except FileNotFoundError:
                pass
            if stop is not None:
                stop.wait(LOG_FOLLOW_POLL_SECONDS)
            else:
                time.sleep(LOG_FOLLOW_POLL_SECONDS)
    finally:
        f.close()


def _filtered(f: object, since: datetime | None) -> Iterator[str]:
    show = since is None
    for raw in f:  # type: ignore[attr-defined]
        line = raw.rstrip("\n")
        if not show:
            m = _STAMP.match(line)
            if m and datetime.fromisoformat(m.group(1).replace("Z", "+00:00")) >= since:  # type: ignore[operator]
                show = True
        if show:
            yield redact(line)
