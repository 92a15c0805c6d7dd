"""`DATA/run/gateway.json`: which process serves this data directory, and where (for `status`)."""

from __future__ import annotations

import contextlib
import json
import os
import time

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from ivoai.common.fsio import atomic_write, read_private_file_or_none
from ivoai.common.procid import is_alive
from ivoai.server.datadir import ServerDataDir

RUN_FILE = "gateway.json"


class RunState(BaseModel):
    pid: int
    listen: str
    base_url: str
    started_at: float
    workers: int = 1  # `start --workers N` (restore --stop-gateway starts it again the same way)


def write_run_state(data_dir: ServerDataDir, *, listen: str, base_url: str, workers: int = 1) -> None:
    """Record this process as the running gateway."""
    state = RunState(
        pid=os.getpid(), listen=listen, base_url=base_url, started_at=time.time(), workers=workers
    )
    atomic_write(data_dir.root, data_dir.run / RUN_FILE, state.model_dump_json().encode("utf-8"))


def clear_run_state(data_dir: ServerDataDir) -> None:
    """Remove the run file if it is ours."""
    state = read_run_state(data_dir)
    if state is not None and state.pid == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            os.unlink(data_dir.run / RUN_FILE)


def read_run_state(data_dir: ServerDataDir) -> RunState | None:
    """The recorded gateway if its process is still alive, else None."""
    raw = read_private_file_or_none(data_dir.root, data_dir.run / RUN_FILE, 64 * 1024)
    if raw is None:
        return None
    try:
        state = RunState.model_validate(json.loads(raw))
    except (ValueError, PydanticValidationError):
        return None
    return state if is_alive(state.pid, "") else None
