"""Setup, repair and update-check costs of the pinned components (issue 17), as same-run ratios.

Prints one JSON line per figure:
  - `ivoai setup` with the default components already installed (the repair path): median wall time
    of the real CLI process over --runs, against `ivoai --version` (the CLI's own floor) in the same run;
  - `ivoai update --dry-run` with nothing to change, against the same reference;
  - a full `ivoai setup` of Codex + Claude Code (fresh XDG root: `npm ci` of the shipped locks, probes,
    launchers, state, ownership) against `npm ci` of the same two locks alone, interleaved.

Everything installs offline from the npm cache scripts/test fills (`IVOAI_TEST_NPM_CACHE`, default
`.tools/npm-cache`); no registry is contacted. The default set includes the Caveman proxy, whose real
release asset cannot be fetched here: the benchmark serves the Caveman stand-in as a tar.gz on
loopback through a copy of the shipped manifest (`IVOAI_TEST_COMPONENTS_MANIFEST`), with the shipped
Codex and Claude entries and locks unchanged.

Usage: .venv/bin/python benchmarks/components.py [--runs N] [--full-runs N]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "src" / "ivoai" / "client" / "components" / "manifest.toml"
STANDIN = REPO / "tests" / "client" / "compression" / "caveman_standin.py"
NPM_CACHE = Path(os.environ.get("IVOAI_TEST_NPM_CACHE", REPO / ".tools" / "npm-cache"))


def _ivoai_argv() -> list[str]:
    script = Path(sys.executable).with_name("ivoai")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ivoai"]


def _env(home: Path, manifest: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = str(home)
    for var, sub in (
        ("XDG_CONFIG_HOME", "c"),
        ("XDG_DATA_HOME", "d"),
        ("XDG_STATE_HOME", "s"),
        ("XDG_CACHE_HOME", "k"),
    ):
        env[var] = str(home / sub)
    env["IVOAI_TEST_COMPONENTS_MANIFEST"] = str(manifest)
    return env


CPU: dict[str, list[float]] = {}


def _time(argv: list[str], env: dict[str, str], cwd: Path | None = None, label: str | None = None) -> float:
    """Wall seconds of one run; its CPU seconds (user + system, children) go to CPU[label]."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=900
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if label is not None:
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        CPU.setdefault(label, []).append(cpu)
    return wall


def _serve(files: dict[str, bytes]) -> tuple[ThreadingHTTPServer, int]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            data = files.get(self.path.lstrip("/"))
            if data is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, httpd.server_address[1]


def _bench_manifest(directory: Path, port: int) -> tuple[Path, bytes, str]:
    """The shipped manifest and locks, with the Caveman asset replaced by the stand-in on loopback."""
    proxy = f"#!{sys.executable}\n".encode() + STANDIN.read_bytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("caveman-proxy")
        info.size, info.mode = len(proxy), 0o755
        tar.addfile(info, io.BytesIO(proxy))
    archive = buf.getvalue()
    text = SHIPPED.read_text()
    start = text.index("[components.caveman.assets.linux-x64]")
    end = text.index("[components.node]")
    proxy_sha, archive_sha = hashlib.sha256(proxy).hexdigest(), hashlib.sha256(archive).hexdigest()
    table = (
        "[components.caveman.assets.linux-x64]\n"
        f'url = "http://127.0.0.1:{port}/caveman.tar.gz"\nsha256 = "{archive_sha}"\nformat = "tar.gz"\n'
        f'max_bytes = 10485760\nfiles = {{ "caveman-proxy" = "{proxy_sha}" }}\n\n'
    )
    (directory / "manifest.toml").write_text(text[:start] + table + text[end:])
    shutil.copytree(SHIPPED.parent / "locks", directory / "locks")
    return directory / "manifest.toml", archive, proxy_sha


def _npm_ci_alone(work: Path) -> float:
    """`npm ci` of the Codex and Claude locks, offline, the way ivoai runs it (scripts off, same cache)."""
    total = 0.0
    for name in ("codex", "claude"):
        target = work / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for file in ("package.json", "package-lock.json"):
            shutil.copy(SHIPPED.parent / "locks" / "npm" / name / file, target / file)
        argv = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev", "--loglevel=error",
                "--offline", "--cache", str(NPM_CACHE)]  # fmt: skip
        total += _time(argv, dict(os.environ), cwd=target)
    return total


def _figure(
    name: str, samples: list[float], reference: str, ref_samples: list[float], **extra: object
) -> None:
    median, ref = statistics.median(samples), statistics.median(ref_samples)
    extra = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in extra.items()}
    print(
        json.dumps(
            {
                "figure": name,
                "median_seconds": round(median, 3),
                "p90_seconds": round(sorted(samples)[int(0.9 * (len(samples) - 1))], 3),
                "reference": reference,
                "reference_median_seconds": round(ref, 3),
                "ratio": round(median / ref, 2),
                "runs": len(samples),
                **extra,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--full-runs", type=int, default=3)
    args = parser.parse_args()
    if not NPM_CACHE.is_dir():
        sys.exit(
            f"{NPM_CACHE} is missing: run scripts/test (it fills the npm cache with the pinned tarballs)"
        )
    with tempfile.TemporaryDirectory(prefix="ivoai-bench-components-") as tmp:
        root = Path(tmp)
        files: dict[str, bytes] = {}
        httpd, port = _serve(files)
        manifest, archive, proxy_sha = _bench_manifest(root, port)
        files["caveman.tar.gz"] = archive
        ivoai = _ivoai_argv()
        offline = ["--offline", "--npm-cache", str(NPM_CACHE)]
        # 1 + 2: repair path and update check on a home with the default components installed.
        env = _env(root / "home", manifest)
        env["IVOAI_TEST_CAVEMAN_SHA256"] = proxy_sha
        first = [
            ["setup", "-c", "codex", "-c", "claude", *offline],
            ["setup", "-c", "caveman"],
        ]  # caveman: loopback
        for argv in first:
            subprocess.run([*ivoai, *argv], env=env, check=True, timeout=900, stdout=subprocess.DEVNULL)
        report = json.loads(
            subprocess.run(
                [*ivoai, "setup", "--json"], env=env, check=True, capture_output=True, text=True
            ).stdout
        )
        assert [(c["name"], c["action"]) for c in report["components"]] == [
            ("codex", "unchanged"),
            ("claude", "unchanged"),
            ("caveman", "unchanged"),
        ], report
        commands = {
            "ivoai --version": [*ivoai, "--version"],
            "ivoai status --json": [*ivoai, "status", "--json"],
            "ivoai setup (repair path)": [*ivoai, "setup"],
            "ivoai update --dry-run": [*ivoai, "update", "--dry-run"],
        }
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for argv in commands.values():
            _time(argv, env)
        for _ in range(args.runs):  # interleaved: machine noise hits every command alike
            for name, argv in commands.items():
                samples[name].append(_time(argv, env, label=name))
        ref = samples["ivoai --version"]
        floor = statistics.median(samples["ivoai status --json"])
        cpu = {name: statistics.median(values) for name, values in CPU.items()}
        for name, label, goal in (
            ("ivoai setup (repair path)", "components: ivoai setup, everything installed (repair path)", 1.0),
            ("ivoai update --dry-run", "components: ivoai update --dry-run, no changes", 2.0),
        ):
            _figure(label, samples[name], "ivoai --version", ref, goal_p50_seconds=goal,
                    ratio_to_status_json=statistics.median(samples[name]) / floor,
                    status_json_median_seconds=floor, cpu_median_seconds=cpu[name],
                    status_json_cpu_median_seconds=cpu["ivoai status --json"],
                    version_cpu_median_seconds=cpu["ivoai --version"])  # fmt: skip
        # 3: a full setup of Codex + Claude against npm ci of the same locks alone.
        full: list[float] = []
        npm: list[float] = []
        for i in range(args.full_runs):
            fresh = _env(root / f"fresh{i}", manifest)
            full.append(_time([*ivoai, "setup", "-c", "codex", "-c", "claude", *offline], fresh))
            shutil.rmtree(root / f"fresh{i}")
            npm.append(_npm_ci_alone(root / "npm"))
        _figure(
            "components: full ivoai setup of codex + claude", full, "npm ci of the same two locks alone", npm
        )
        httpd.shutdown()


if __name__ == "__main__":
    main()
