"""Stand-in for caveman-proxy (Caveman bin-v1.1.3), which cannot be fetched on this machine.

It imitates the contract ivoai relies on, as documented upstream (see design/PEERS.md):

- `caveman-proxy version --json` prints `{"version": "dev", "schema": …, "capabilities": […]}`
  (the pinned build really reports "dev").
- `caveman-proxy serve --host 127.0.0.1 --port P` serves `GET /health/ready` and `/health/live`
  with `{"ok": true, "service": "caveman-proxy", "schema": "caveman.proxy.health.v1"}`.
- It refuses to start unless CAVEMAN_HOME is a 0700 directory and CAVEMAN_CONFIG a 0600 file
  inside it whose text disables capture (what seed 003 requires ivoai to prepare).

Test-only knobs (never part of the real proxy): `GET /_standin/exit` makes it exit with status 3
(a proxy dying mid-session); a file `CAVEMAN_HOME/../../standin-delay` holding seconds delays
readiness. It writes nothing outside CAVEMAN_HOME.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HEALTH = {"ok": True, "service": "caveman-proxy", "schema": "caveman.proxy.health.v1"}


def check_runtime() -> str:
    home = os.environ.get("CAVEMAN_HOME", "")
    config = os.environ.get("CAVEMAN_CONFIG", "")
    st_home = os.lstat(home)
    st_conf = os.lstat(config)
    if not stat.S_ISDIR(st_home.st_mode) or stat.S_IMODE(st_home.st_mode) != 0o700:
        sys.exit("CAVEMAN_HOME must be a 0700 directory")
    if not stat.S_ISREG(st_conf.st_mode) or stat.S_IMODE(st_conf.st_mode) != 0o600:
        sys.exit("CAVEMAN_CONFIG must be a 0600 file")
    if os.path.dirname(config) != home:
        sys.exit("CAVEMAN_CONFIG must live in CAVEMAN_HOME")
    with open(config, encoding="utf-8") as fh:
        text = fh.read()
    if "enabled: false" not in text.split("capture:", 1)[-1]:
        sys.exit("capture must be disabled")
    return home


def serve(port: int) -> None:
    home = check_runtime()
    delay_file = os.path.join(os.path.dirname(os.path.dirname(home)), "standin-delay")
    ready_at = time.monotonic()
    if os.path.exists(delay_file):
        with open(delay_file, encoding="utf-8") as fh:
            ready_at += float(fh.read().strip() or 0)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/_standin/exit":
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"bye")
                threading.Timer(0.05, lambda: os._exit(3)).start()
                return
            if self.path in ("/health/ready", "/health/live"):
                ready = time.monotonic() >= ready_at or self.path == "/health/live"
                body = json.dumps(HEALTH if ready else {**HEALTH, "ok": False}).encode()
                self.send_response(200 if ready else 503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(404)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.serve_forever()


def main(argv: list[str]) -> int:
    if argv[:2] == ["version", "--json"]:
        print(
            json.dumps(
                {"version": "dev", "schema": "caveman.proxy.version.v1", "capabilities": ["proxy", "health"]}
            )
        )
        return 0
    if argv[:1] == ["serve"] and "--port" in argv and argv[argv.index("--host") + 1] == "127.0.0.1":
        serve(int(argv[argv.index("--port") + 1]))
        return 0
    print("usage: caveman-proxy version --json | serve --host 127.0.0.1 --port P", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
