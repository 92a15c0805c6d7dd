"""The orchestrator's thread-free stdio: lines in, frames out, and stray output kept off the wire."""

from __future__ import annotations

import subprocess
import sys

CHILD = r"""
import anyio, os, sys
from ivoai.client.orchestration._stdio import claimed_wire

async def main():
    with claimed_wire() as (reader, writer):
        print("stray print", flush=True)            # fd 1 is stderr now
        os.write(1, b"stray write\n")
        assert sys.stdin.read() == ""                # fd 0 is /dev/null now
        async for line in reader:
            await writer.write("echo:" + line)
    print("after", flush=True)                       # fd 1 is the wire again

anyio.run(main)
"""


def test_lines_are_echoed_on_the_wire_and_stray_output_goes_to_stderr() -> None:
    big = "x" * 200_000
    proc = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=f"one\n{big}\nlast-without-newline",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert proc.stdout == f"echo:one\necho:{big}\necho:last-without-newlineafter\n"
    assert "stray print" in proc.stderr and "stray write" in proc.stderr
