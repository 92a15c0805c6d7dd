"""AUTO part 2 figures (issue 16): one JSON line per figure, each with its reference from this run.

    .venv/bin/python benchmarks/auto2_bench.py [--runs N]

- auto_failover_seconds_p50: from the supervisor's confirmed hard limit to the alternate TUI's
  exec (`failover_seconds` in the alternate's session record: monotonic clock of the `ivoai auto`
  process), goal p50 <= 1.5 s. Each run is a real `ivoai auto --yes` in a git work tree: the
  primary is the logged-in codex stand-in (tests/client/orchestration/codex_standin.py) writing the
  usage-limit events the real Codex writes into its rollout; the supervisor re-reads the quota
  (stand-in app-server), reaps the primary, re-probes the alternate (claude stand-in), summarizes
  the work tree, writes the checkpoint, builds the brief and launches the alternate. Reference: a
  plain `ivoai claude --direct` launch to the client's exec in the same run (what opening a TUI
  through the launcher costs by itself).
- auto_worktree_summary_ms_p50: the bounded work-tree summary of this repository's checkout (two
  git calls, no file changed), goal <= 200 ms; reference: one bare `git status --porcelain` of the
  same checkout in the same run.
- auto_ruflo_gate_added_seconds_p50: `ivoai auto --yes` start to the primary's exec with
  `auto.coordinator = ruflo` (the real ruflo 3.38.12: `IVOAI_TEST_RUFLO` or tools/ruflo) minus the
  same with `native`, alternating in the same run.

Stand-ins are used because a logged-in subscription cannot be had here; everything runs in fresh
temporary HOME/XDG trees and touches none of the user's files.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _isolate(base: Path) -> None:
    home = base / "home"
    home.mkdir(mode=0o700)
    os.environ["HOME"] = str(home)
    for var, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
    ):
        os.environ[var] = str(base / sub)


def _git_tree(path: Path) -> Path:
    from tests.client.orchestration.workers import git_tree

    repo = git_tree(path)
    (repo / "parser.py").write_text("def parse(x):\n    return x + 1\n")
    return repo


def _standins(base: Path, *, limit: bool) -> tuple[Path, Path]:
    from tests.client.orchestration.support import codex_standin, fixture, install

    from ivoai.common.paths import xdg_paths

    xdg = xdg_paths()
    rollout = {"message": "You’ve hit your usage limit.", "codex_error_info": "usage_limit_exceeded",
               "limited": True}  # fmt: skip
    script: dict[str, Any] = {
        "account": fixture("codex_account_chatgpt.json"),
        "model_list": fixture("codex_model_list.json"),
        "rate_limits": fixture("codex_rate_limits_legacy.json"),
        "rate_limits_limited": fixture("codex_rate_limits_exhausted.json"),
        "primary": {"rollout": rollout} if limit else {},
    }
    codex_home = codex_standin(xdg, script)
    install(xdg, "claude", "claude_standin.py")
    claude_home = Path(os.environ["HOME"]) / ".claude"
    claude_home.mkdir(exist_ok=True)
    doc = {"logged_in": True, "initialize": fixture("claude_initialize_models.json")}
    (claude_home / "ivoai-standin.json").write_text(json.dumps(doc))
    xdg.data.chmod(0o700)
    return codex_home, claude_home


def _fresh(tag: str) -> Path:
    base = Path(tempfile.mkdtemp(prefix=f"ivoai-auto2-{tag}-"))
    _isolate(base)
    return base


def _records() -> list[dict[str, Any]]:
    from ivoai.common.paths import xdg_paths

    docs = [json.loads(p.read_text()) for p in xdg_paths().sessions_dir.glob("ses_*.json")]
    return sorted(docs, key=lambda d: d["started_at"])


def bench_failover(runs: int) -> dict[str, Any]:
    failover, plain = [], []
    for _ in range(runs):
        base = _fresh("failover")
        try:
            _standins(base, limit=True)
            repo = _git_tree(base / "repo")
            done = subprocess.run(
                [sys.executable, "-m", "ivoai", "auto", "--yes"], cwd=repo, capture_output=True, text=True,
                timeout=240, env=dict(os.environ), check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            second = _records()[-1]
            failover.append(float(second["auto"]["incoming"]["failover_seconds"]))
            # reference: the same alternate started directly through the launcher
            claude_runs = Path(os.environ["HOME"]) / ".claude" / "ivoai-standin-runs.jsonl"
            before = len(claude_runs.read_text().splitlines())
            t0 = time.time()
            subprocess.run(
                [sys.executable, "-m", "ivoai", "claude", "--direct"], cwd=repo, capture_output=True,
                timeout=120, env=dict(os.environ), check=True,
            )  # fmt: skip
            started = json.loads(claude_runs.read_text().splitlines()[before])["at"]
            plain.append(started - t0)
        finally:
            shutil.rmtree(base, ignore_errors=True)
    p50 = statistics.median(failover)
    return {
        "figure": "auto_failover_seconds_p50",
        "value": round(p50, 3),
        "goal": "<= 1.5 s",
        "runs": runs,
        "max_seconds": round(max(failover), 3),
        "reference_plain_launch_seconds_p50": round(statistics.median(plain), 3),
        "ratio_to_reference": round(p50 / statistics.median(plain), 2),
    }


def bench_worktree(runs: int) -> dict[str, Any]:
    from ivoai.client.orchestration._worktree import summarize_worktree

    summarize_worktree(str(REPO))
    summary, status = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = summarize_worktree(str(REPO))
        t1 = time.perf_counter()
        subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, check=True)
        t2 = time.perf_counter()
        assert result.git
        summary.append((t1 - t0) * 1000)
        status.append((t2 - t1) * 1000)
    p50 = statistics.median(summary)
    return {
        "figure": "auto_worktree_summary_ms_p50",
        "value": round(p50, 1),
        "goal": "<= 200 ms",
        "changed_files": result.changed_total,
        "reference_git_status_ms_p50": round(statistics.median(status), 1),
        "ratio_to_reference": round(p50 / statistics.median(status), 2),
    }


def bench_ruflo_gate(runs: int) -> dict[str, Any]:
    from tests.conftest import tool_path

    from ivoai.client.config.store import set_key

    ruflo = tool_path("ruflo")
    if not ruflo.exists():
        missing = f"no ruflo at {ruflo}"
        return {"figure": "auto_ruflo_gate_added_seconds_p50", "value": None, "error": missing}
    timings: dict[str, list[float]] = {"native": [], "ruflo": []}
    for _ in range(runs):
        for coordinator in ("native", "ruflo"):
            base = _fresh(coordinator)
            try:
                codex_home, _ = _standins(base, limit=False)
                bindir = base / "data" / "ivoai" / "bin"
                (bindir / "ruflo").symlink_to(ruflo)
                set_key("auto.coordinator", coordinator)
                repo = _git_tree(base / "repo")
                t0 = time.time()
                done = subprocess.run(
                    [sys.executable, "-m", "ivoai", "auto", "--yes"], cwd=repo, capture_output=True,
                    text=True, timeout=240, env=dict(os.environ), check=False,
                )  # fmt: skip
                assert done.returncode == 0, done.stderr
                record = _records()[-1]
                shown = record["auto"]["coordinator"]
                assert shown["coordinator"] == coordinator, shown
                lines = (codex_home / "ivoai-standin-requests.jsonl").read_text().splitlines()
                started = next(json.loads(x)["at"] for x in lines if "primary_argv" in x)
                timings[coordinator].append(started - t0)
            finally:
                shutil.rmtree(base, ignore_errors=True)
    native, gated = statistics.median(timings["native"]), statistics.median(timings["ruflo"])
    return {
        "figure": "auto_ruflo_gate_added_seconds_p50",
        "value": round(gated - native, 3),
        "runs": runs,
        "native_start_to_exec_seconds_p50": round(native, 3),
        "ruflo_start_to_exec_seconds_p50": round(gated, 3),
        "ratio_to_native": round(gated / native, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    for bench in (bench_worktree, bench_failover, bench_ruflo_gate):
        runs = args.runs * 5 if bench is bench_worktree else args.runs
        print(json.dumps(bench(runs)), flush=True)


if __name__ == "__main__":
    main()
