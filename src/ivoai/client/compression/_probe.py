"""Bounded probe subprocesses for provider preflights: structured argv, minimal env, capped output."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

from ivoai.client.agents.childenv import probe_env
from ivoai.common.limits import PROBE_OUTPUT_MAX_BYTES


class ProbeResult:
    """Exit code and (capped, decoded) output of one probe; `timed_out` / `failed_to_start` flags."""

    __slots__ = ("code", "failed_to_start", "stderr", "stdout", "timed_out")

    def __init__(
        self,
        code: int | None,
        stdout: str,
        stderr: str,
        *,
        timed_out: bool = False,
        failed_to_start: bool = False,
    ) -> None:
        self.code = code
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        self.failed_to_start = failed_to_start

    @property
    def ok(self) -> bool:
        return self.code == 0


def run_probe(
    argv: Sequence[str], *, timeout: float, env: Mapping[str, str], extra_env: Mapping[str, str] | None = None
) -> ProbeResult:
    """Run a probe with stdin closed, a minimal environment and a timeout (never a shell)."""
    penv = probe_env(env)
    if extra_env:
        penv.update(extra_env)
    try:
        proc = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            env=penv,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ProbeResult(None, "", "", timed_out=True)
    except OSError as exc:
        return ProbeResult(None, "", exc.strerror or str(exc), failed_to_start=True)
    out = proc.stdout[:PROBE_OUTPUT_MAX_BYTES].decode("utf-8", "replace")
    err = proc.stderr[:PROBE_OUTPUT_MAX_BYTES].decode("utf-8", "replace")
    return ProbeResult(proc.returncode, out, err)
