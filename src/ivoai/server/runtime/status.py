"""`ivoai server status`: configuration, the running process, its health, and credential counts."""

from __future__ import annotations

from typing import Any

import httpx2

from ivoai.server.auth.enrollment import EnrollmentStore
from ivoai.server.auth.oauth_store import OAuthStore
from ivoai.server.config import load_config
from ivoai.server.datadir import ServerDataDir
from ivoai.server.runtime.runstate import read_run_state

PROBE_TIMEOUT_SECONDS = 3.0  # a local gateway answers /health in milliseconds


def server_status(data_dir: ServerDataDir) -> dict[str, Any]:
    """A JSON-ready summary of one server data directory (secret-free)."""
    settings = load_config(data_dir).gateway
    enrollment = EnrollmentStore(data_dir.root, data_dir.enrollment)
    oauth = OAuthStore(data_dir.root, data_dir.oauth)
    codes = enrollment.list_codes()
    clients = enrollment.list_clients()
    out: dict[str, Any] = {
        "data_dir": str(data_dir.root),
        "initialized": data_dir.config_file.exists(),
        "listen": f"{settings.listen_host}:{settings.listen_port}",
        "public_url": settings.base_url,
        "tls": settings.tls,
        "trusted_proxies": [str(n) for n in settings.trusted_proxies],
        "reingest_interval_seconds": settings.reingest_interval_seconds,
        "enrollment": {
            "open_codes": sum(1 for c in codes if enrollment.code_status(c) == "open"),
            "active_clients": sum(1 for c in clients if c.revoked_at is None),
        },
        "web_access": oauth.summary(),
        "running": False,
    }
    run = read_run_state(data_dir)
    if run is not None:
        out["running"] = True
        out["pid"] = run.pid
        out["url"] = run.base_url
        out["health"] = _probe(run.base_url + "/health")
        out["ready"] = _probe(run.base_url + "/ready")
    return out


def _probe(url: str) -> dict[str, Any]:
    try:
        with httpx2.Client(timeout=PROBE_TIMEOUT_SECONDS, verify=True, follow_redirects=False) as client:
            response = client.get(url)
        body: Any = (
            response.json()
            if response.headers.get("content-type", "").startswith("application/json")
            else None
        )
        return {"status_code": response.status_code, "body": body}
    except httpx2.HTTPError as exc:
        return {"error": type(exc).__name__}
