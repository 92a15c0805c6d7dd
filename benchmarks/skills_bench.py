"""Skill control plane figures (issue 20), each against a reference measured in the same run.

Prints one JSON line per figure:
  - skills_index_1000_vs_read_4k (mixed shapes, below) and skills_index_1000_simple_vs_read_4k
    (every front matter plain `key: value` lines, the usual Agent Skills shape):
    `index_directory` over 1,000 skill directories (front matter only:
    openat2 without links, bounded read, strict parse, validation) against reading the first 4 KiB
    of the same 1,000 SKILL.md files, once with `open(path, "rb").read(4096)` (what Python code
    would write) and once with raw `os.open`/`os.read`. ratio = reference time / index time; the
    target is >= 0.5. Medians of interleaved runs; the files are in the page cache for both.
    Also the index's I/O alone (`index_io_only_ms`: its scan and no-follow reads, no parse) and the
    share of the index time that is parsing and validating (`parse_share_of_index`).
  - skills_resolve_policy_12_tasks_p50_ms: policy for 1,000 indexed skills plus the resolver for a
    12-task AUTO plan (role, tier, executor and capabilities per task), p50 over the runs; target
    <= 20 ms. Reference: one pass over the 1,000 candidates per task keeping those whose roles
    match (the least any selection does), p50 in the same run.

The 1,000 skills are synthetic but shaped like real ones: an 8 KiB body, 80 % written as plain
`key: value` lines and 20 % with a `metadata:` block and a `|` description (the general parser),
roles spread over AUTO's seven roles, some dependencies, conflicts, exclusive roles, tool grants,
risks and a few denied claims.

Usage: .venv/bin/python benchmarks/skills_bench.py [--runs N] [--skills N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ivoai.client.skills.frontmatter import read_front_matter
from ivoai.client.skills.index import IndexEntry, index_directory
from ivoai.client.skills.model import AUTO_ROLES, TIERS, UserPolicy
from ivoai.client.skills.policy import evaluate
from ivoai.client.skills.resolver import Candidate, Catalog, resolve
from ivoai.client.skills.select import worker_request

BODY = ("Follow these steps carefully when the task matches.\n" * 160)[:8192]


def _front_matter(i: int, rng: random.Random, simple: bool = False) -> str:
    roles = rng.sample(AUTO_ROLES, rng.choice([1, 1, 2]))
    caps = rng.choice([["read"], ["read", "search"], ["read", "mcp"], ["write"], ["network"], []])
    lines = {
        "name": f"skill-{i:04d}",
        "description": f"Skill number {i} helps with {roles[0]} work on repositories of kind {i % 17}",
        "version": f"1.{i % 10}.{i % 7}",
        "roles": "[" + ", ".join(roles) + "]",
        "risk": rng.choice(["low", "low", "moderate", "high"]),
        "license": "MIT",
    }
    if caps:
        lines["capabilities"] = "[" + ", ".join(caps) + "]"
    if i % 11 == 0 and i > 0:
        lines["dependencies"] = f"[skill-{i - 1:04d}]"
    if i % 13 == 0:
        lines["conflicts"] = f"[skill-{(i + 5) % 1000:04d}]"
    if i % 50 == 0:
        lines["exclusive-role"] = "formatter"
    if i % 37 == 0:
        lines["capabilities"] = "[shell]"  # denied
    if i % 5 == 4 and not simple:  # the general parser's shapes
        desc = lines.pop("description")
        risk = lines.pop("risk")
        text = "\n".join(f"{k}: {v}" for k, v in lines.items())
        block = (
            f"description: |\n  {desc}\n  over two lines\nmetadata:\n  risk: {risk}\n  owner: team-{i % 3}\n"
        )
        return f"{text}\n{block}"
    return "\n".join(f"{k}: {v}" for k, v in lines.items()) + "\n"


def build_tree(root: Path, count: int, *, simple: bool = False) -> list[str]:
    rng = random.Random(20)
    paths = []
    for i in range(count):
        directory = root / f"skill-{i:04d}"
        directory.mkdir()
        path = directory / "SKILL.md"
        path.write_text(f"---\n{_front_matter(i, rng, simple)}---\n{BODY}")
        paths.append(str(path))
    return paths


def read_io(paths: list[str]) -> None:
    for path in paths:
        with open(path, "rb") as fh:
            fh.read(4096)


def read_os(paths: list[str]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        os.read(fd, 4096)
        os.close(fd)


def read_front_matters(root: Path) -> None:
    """The index's own I/O without its parse: the same directory scan and the same no-follow read of
    each front matter (openat2, fstat, bounded read, close, decode). Shows how much of the index time
    is reading and how much is parsing and validating."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with os.scandir(fd) as it:
            names = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        for name in names:
            read_front_matter(fd, f"{name}/SKILL.md")
    finally:
        os.close(fd)


def _both(func: object, *args: object) -> tuple[float, float]:
    """(wall, CPU) seconds of one call; CPU time (user + system of this process) is what the work
    costs, and stays meaningful when the shared machine's load makes wall time wait for a core."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    func(*args)  # type: ignore[operator]
    return time.perf_counter() - wall0, time.process_time() - cpu0


def bench_index(root: Path, paths: list[str], runs: int, figure: str) -> dict[str, object]:
    result = index_directory(root, max_skills=len(paths) + 1)
    assert len(result.entries) == len(paths), result.quarantined[:3]
    wall: dict[str, list[float]] = {"index": [], "open_read": [], "os_read": [], "io_only": []}
    cpu: dict[str, list[float]] = {"index": [], "open_read": [], "os_read": [], "io_only": []}
    for _ in range(runs):
        for name, func, arg in (
            ("open_read", read_io, paths),
            ("index", index_directory, root),
            ("os_read", read_os, paths),
            ("io_only", read_front_matters, root),
        ):
            w, c = _both(func, arg)
            wall[name].append(w)
            cpu[name].append(c)
    med = {k: statistics.median(v) for k, v in wall.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    return {
        "figure": figure,
        "skills": len(paths),
        "index_ms": round(med["index"] * 1000, 2),
        "open_read_4k_ms": round(med["open_read"] * 1000, 2),
        "os_read_4k_ms": round(med["os_read"] * 1000, 2),
        "ratio_vs_open_read": round(med["open_read"] / med["index"], 3),
        "ratio_vs_os_read": round(med["os_read"] / med["index"], 3),
        "index_io_only_ms": round(med["io_only"] * 1000, 2),
        "io_only_ratio_vs_open_read": round(med["open_read"] / med["io_only"], 3),
        "parse_share_of_index": round(1 - med["io_only"] / med["index"], 3),
        "cpu_index_ms": round(cmed["index"] * 1000, 2),
        "cpu_ratio_vs_open_read": round(cmed["open_read"] / cmed["index"], 3),
        "cpu_ratio_vs_os_read": round(cmed["os_read"] / cmed["index"], 3),
        "target": ">= 0.5",
        "runs": runs,
        "load_average_1m": round(os.getloadavg()[0], 1),
    }


def _plan() -> list[tuple[str, str, str, list[str]]]:
    rng = random.Random(12)
    tasks = []
    for i in range(12):
        role = AUTO_ROLES[i % len(AUTO_ROLES)]
        caps = rng.choice([["read", "search"], ["read", "mcp", "memory", "context"], ["read"]])
        tasks.append((role, TIERS[i % len(TIERS)], rng.choice(["codex", "claude"]), caps))
    return tasks


def plan_once(entries: list[IndexEntry], tasks: list[tuple[str, str, str, list[str]]]) -> int:
    candidates = []
    for entry in entries:
        meta = entry.meta
        digest = f"sha256:{meta.name}"
        candidates.append(
            Candidate(meta, digest, f"/objects/{meta.name}", evaluate(meta, digest=digest, user=UserPolicy()))
        )
    catalog = Catalog.build(candidates)
    selected = 0
    for role, tier, executor, caps in tasks:
        selected += len(resolve(catalog, worker_request(role, tier, executor, caps)).selected)
    return selected


def role_pass(entries: list[IndexEntry], tasks: list[tuple[str, str, str, list[str]]]) -> int:
    found = 0
    for role, _, _, _ in tasks:
        found += sum(1 for e in entries if role in e.meta.roles)
    return found


def bench_plan(root: Path, runs: int) -> dict[str, object]:
    entries = list(index_directory(root, max_skills=100_000).entries)
    tasks = _plan()
    selected = plan_once(entries, tasks)
    wall: list[float] = []
    cpu: list[float] = []
    ref_wall: list[float] = []
    ref_cpu: list[float] = []
    for _ in range(runs):
        w, c = _both(role_pass, entries, tasks)
        ref_wall.append(w)
        ref_cpu.append(c)
        w, c = _both(plan_once, entries, tasks)
        wall.append(w)
        cpu.append(c)
    p50 = statistics.median(wall)
    cpu50 = statistics.median(cpu)
    return {
        "figure": "skills_resolve_policy_12_tasks_p50_ms",
        "skills": len(entries),
        "tasks": len(tasks),
        "selected_total": selected,
        "p50_ms": round(p50 * 1000, 2),
        "p90_ms": round(sorted(wall)[int(len(wall) * 0.9) - 1] * 1000, 2),
        "cpu_p50_ms": round(cpu50 * 1000, 2),
        "reference_role_pass_p50_ms": round(statistics.median(ref_wall) * 1000, 2),
        "ratio_vs_role_pass": round(p50 / statistics.median(ref_wall), 2),
        "cpu_ratio_vs_role_pass": round(cpu50 / statistics.median(ref_cpu), 2),
        "target": "p50 <= 20 ms",
        "runs": runs,
        "load_average_1m": round(os.getloadavg()[0], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--skills", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ivoai-skills-bench-") as tmp:
        root = Path(tmp) / "skills"
        root.mkdir()
        paths = build_tree(root, args.skills)
        simple_root = Path(tmp) / "simple"
        simple_root.mkdir()
        simple_paths = build_tree(simple_root, args.skills, simple=True)
        _emit(bench_index(root, paths, args.runs, "skills_index_1000_vs_read_4k"))
        _emit(bench_index(simple_root, simple_paths, args.runs, "skills_index_1000_simple_vs_read_4k"))
        _emit(bench_plan(root, max(args.runs, 30)))


def _emit(figure: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(figure) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
