"""`ivoai server init|start|status`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ivoai.cli._output import info, print_json, print_kv
from ivoai.cli.server import data_dir_from, server_command


def init_command(
    ctx: typer.Context,
    listen: str | None = typer.Option(
        None, "--listen", help="HOST:PORT to listen on (default 127.0.0.1:7744)."
    ),
    public_url: str | None = typer.Option(
        None, "--public-url", help="Canonical public origin, e.g. https://ai.example.com."
    ),
    mode: str | None = typer.Option(
        None, "--mode", help="embedded (bundled e5 + Qdrant Edge, the default) or services (TEI + Qdrant)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Create the server data directory (0700) and config.toml; safe to re-run."""
    from ivoai.server.runtime.lifecycle import init_server

    root = data_dir_from(ctx, initialize=False)
    result = init_server(root, listen=listen, public_url=public_url, mode=mode)
    if json_out:
        print_json(result)
        return
    info(f"server data directory ready: {result['data_dir']}")
    info(f"config: {result['config']} ({'created' if result['config_created'] else 'kept'})")
    info(f"next: {server_command(root, 'start')}   (then: {server_command(root, 'enrollment create')})")


def start_command(
    ctx: typer.Context,
    listen: str | None = typer.Option(
        None, "--listen", help="HOST:PORT (default from config, 127.0.0.1:7744)."
    ),
    public_url: str | None = typer.Option(
        None, "--public-url", help="Canonical public origin (https://HOST)."
    ),
    trusted_proxy: list[str] = typer.Option(
        [], "--trusted-proxy", help="CIDR of a TLS-terminating proxy (repeatable)."
    ),
    tls_cert: Path | None = typer.Option(None, "--tls-cert", help="PEM certificate chain for direct TLS."),
    tls_key: Path | None = typer.Option(None, "--tls-key", help="PEM private key for direct TLS."),
    reingest_interval: int | None = typer.Option(
        None, "--reingest-interval", help="Seconds between connector re-ingestions (default 300)."
    ),
    workers: int = typer.Option(
        1, "--workers", help="Gateway processes on one socket (> 1 needs services mode: a Qdrant server)."
    ),
) -> None:
    """Run the gateway in the foreground until interrupted."""
    from ivoai.server.runtime.lifecycle import StartOptions, start_server

    start_server(
        data_dir_from(ctx),
        StartOptions(
            listen=listen,
            public_url=public_url,
            trusted_proxies=tuple(trusted_proxy),
            tls_cert=tls_cert,
            tls_key=tls_key,
            reingest_interval_seconds=reingest_interval,
            workers=workers,
        ),
        announce=info,
    )


def status_command(
    ctx: typer.Context, json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")
) -> None:
    """Show the server's configuration, process and health (never creates anything)."""
    from ivoai.server.datadir import ServerDataDir
    from ivoai.server.runtime.status import server_status

    root = data_dir_from(ctx, initialize=False)
    status = server_status(ServerDataDir(root))
    if json_out:
        print_json(status)
        return
    print_kv(_status_lines(status, root))


def _probe_text(probe: dict[str, Any] | None) -> str:
    if not probe:
        return "-"
    if "error" in probe:
        return f"unreachable ({probe['error']})"
    body: dict[str, Any] = probe["body"] if isinstance(probe.get("body"), dict) else {}
    text = str(body.get("status") or f"HTTP {probe.get('status_code')}")
    checks: dict[str, Any] = body["checks"] if isinstance(body.get("checks"), dict) else {}
    parts = []
    for name, check in sorted(checks.items()):
        if isinstance(check, dict):
            detail = check.get("error") or (
                f"{check['documents']} documents" if "documents" in check else check.get("status")
            )
            parts.append(f"{name} {detail}")
    return f"{text} ({', '.join(parts)})" if parts else text


def _status_lines(status: dict[str, Any], root: Path) -> list[tuple[str, str]]:
    """`server status` as readable `key: value` lines (the JSON document has every field)."""
    initialized = (
        "yes"
        if status["initialized"]
        else f"no (`{server_command(root, 'init')}` creates it; any other server command does too)"
    )
    web = status["web_access"]
    lines = [
        ("data dir", status["data_dir"]),
        ("initialized", initialized),
        ("listen", status["listen"]),
        ("public url", status["public_url"]),
        ("tls", "on" if status["tls"] else "off"),
        ("trusted proxies", ", ".join(status["trusted_proxies"]) or "none"),
        ("re-ingest every", f"{status['reingest_interval_seconds']} s"),
    ]
    if status["running"]:
        lines += [
            ("running", f"yes, pid {status['pid']} at {status['url']}"),
            ("health", _probe_text(status.get("health"))),
            ("ready", _probe_text(status.get("ready"))),
        ]
    else:
        lines.append(("running", f"no (`{server_command(root, 'start')}` runs it)"))
    lines += [
        ("open enrollment codes", str(status["enrollment"]["open_codes"])),
        ("active clients", str(status["enrollment"]["active_clients"])),
        (
            "web access",
            f"{web['active_grants']} grant(s), {web['open_activation_codes']} open activation code(s), "
            f"{web['registered_clients']} registered client(s)",
        ),
    ]
    return lines
