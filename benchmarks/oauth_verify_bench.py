"""Per-request cost of the `/mcp` bearer check (`IvoaiOAuthProvider.verify_principal`), this tree
against another source tree in the same run.

    .venv/bin/python benchmarks/oauth_verify_bench.py [--grants 100] [--calls 20000] [--rounds 5] \\
        [--baseline-src DIR]

`--baseline-src DIR` (e.g. `git archive 12e4843 src | tar -x -C /tmp/base`) measures the same
workload with `DIR/src` first on `sys.path`, in a child process, alternating rounds with this tree.
The workload uses only the store API both versions share: `--grants` clients each approved and
redeemed (one live access token each) through the real store, then `--calls` checks of those tokens
round-robin (plus one unknown token in eight) on one thread, as the event loop does. Prints one
JSON line per figure: microseconds per check (best round) and, with a baseline, the ratio
this/baseline. `flooded` repeats this tree's figure in the same process after 5,000 unused
registrations and 5,000 pending consent requests (the bounds a flood fills; the JSON store could
not hold them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESOURCE = "http://127.0.0.1:7744/mcp"


def _setup(data_root: Path, grants: int) -> tuple[Any, list[str]]:
    from ivoai.server.auth.oauth_provider import IvoaiOAuthProvider
    from ivoai.server.auth.oauth_store import OAuthStore
    from ivoai.server.datadir import ServerDataDir

    data = ServerDataDir(data_root).ensure()
    store = OAuthStore(data.root, data.oauth)
    tokens = []
    for i in range(grants):
        client_id = f"bench-{i}"
        store.register_client(client_id, {"redirect_uris": ["https://client.example/cb"]}, None)
        code, _ = store.approve(
            activation_code=store.create_activation().code,
            client_id=client_id,
            requested_scopes=["context:read", "memory:read"],
            code_challenge="c" * 43,
            redirect_uri="https://client.example/cb",
            redirect_uri_provided_explicitly=True,
            resource=RESOURCE,
        )
        tokens.append(store.redeem_code(code, client_id).access_token)
    provider = IvoaiOAuthProvider(store, issuer="http://127.0.0.1:7744", resource=RESOURCE)
    return provider, tokens


def _flood(provider: Any) -> None:
    from ivoai.server.auth.oauth_store import PendingAuthorization

    store = provider.store
    uris = [f"https://flood.example/{n}/" + "p" * 440 for n in range(7)]
    meta = {"redirect_uris": uris, "client_name": "x"}
    for i in range(5000):
        store.register_client(f"flood-{i}", meta, None)
        store.park_pending(
            PendingAuthorization(
                request_id=f"req-{i}",
                client_id=f"flood-{i}",
                client_name="x",
                redirect_uri="https://flood.example/0/",
                redirect_uri_provided_explicitly=True,
                scopes=["context:read"],
                state="s" * 1024,
                code_challenge="c" * 43,
                resource=RESOURCE,
                created_at=time.time(),
            )
        )


def _round(provider: Any, tokens: list[str], calls: int) -> float:
    """Microseconds per check over `calls` checks."""
    unknown = "ivo_at_" + "u" * 43
    verify = provider.verify_principal
    n = len(tokens)
    ok = 0
    start = time.perf_counter()
    for i in range(calls):
        token = unknown if i % 8 == 7 else tokens[i % n]
        if verify(token) is not None:
            ok += 1
    elapsed = time.perf_counter() - start
    assert ok == calls - calls // 8, ok  # every live token verified, every unknown one refused
    return elapsed / calls * 1e6


def child(args: argparse.Namespace) -> None:
    """Serve commands on stdin/stdout: "round" answers one figure; "flood" fills the bounds, then "ok"."""
    with tempfile.TemporaryDirectory() as tmp:
        provider, tokens = _setup(Path(tmp) / "srv", args.grants)
        _round(provider, tokens, min(args.calls, 2000))  # warm caches and connections
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "round":
                print(json.dumps(_round(provider, tokens, args.calls)), flush=True)
            elif line.strip() == "flood":
                _flood(provider)
                _round(provider, tokens, min(args.calls, 2000))
                print("ok", flush=True)


def _spawn(src: Path, args: argparse.Namespace) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, __file__, "--child", "--grants", str(args.grants), "--calls", str(args.calls)]
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _ask(proc: subprocess.Popen[str], command: str = "round") -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(command + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--grants", type=int, default=100)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline-src", type=Path, help="another tree (with src/ivoai) to compare against")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    this = _spawn(ROOT / "src", args)
    base = _spawn(args.baseline_src / "src", args) if args.baseline_src else None
    ours: list[float] = []
    theirs: list[float] = []
    flooded: list[float] = []
    try:
        for _ in range(args.rounds):
            ours.append(float(_ask(this)))
            if base is not None:
                theirs.append(float(_ask(base)))
        assert _ask(this, "flood") == "ok"
        flooded = [float(_ask(this)) for _ in range(args.rounds)]
    finally:
        for proc in (this, base):
            if proc is not None and proc.stdin is not None:
                proc.stdin.close()
                proc.wait(timeout=60)
    figure: dict[str, Any] = {
        "figure": "oauth_verify_us_per_check",
        "value": round(min(ours), 2),
        "rounds": [round(v, 2) for v in ours],
        "grants": args.grants,
    }
    if theirs:
        figure["baseline_us"] = round(min(theirs), 2)
        figure["baseline_rounds"] = [round(v, 2) for v in theirs]
        figure["ratio_vs_baseline"] = round(min(ours) / min(theirs), 3)
    print(json.dumps(figure))
    print(
        json.dumps(
            {
                "figure": "oauth_verify_us_per_check_flooded",
                "value": round(min(flooded), 2),
                "rounds": [round(v, 2) for v in flooded],
                "ratio_vs_unflooded": round(min(flooded) / min(ours), 3),
                "unused_clients": 5000,
                "pending_requests": 5000,
            }
        )
    )


if __name__ == "__main__":
    main()
