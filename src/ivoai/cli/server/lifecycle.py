"""`ivoai server init|start|status`."""

from __future__ import annotations

from pathlib import Path

import typer

from ivoai.cli._output import info, print_json, print_kv
from ivoai.cli.server import data_dir_from


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
    from ivoai.server.gateway.lifecycle import init_server

    result = init_server(data_dir_from(ctx), listen=listen, public_url=public_url, mode=mode)
    if json_out:
        print_json(result)
        return
    info(f"server data directory ready: {result['data_dir']}")
    info(f"config: {result['config']} ({'created' if result['config_created'] else 'kept'})")
    info("next: ivoai server start   (then: ivoai server enrollment create)")


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
    from ivoai.server.gateway.lifecycle import StartOptions, start_server

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
    """Show the server's configuration, process and health."""
    from ivoai.server.datadir import ServerDataDir
    from ivoai.server.gateway.status import server_status

    data = ServerDataDir(data_dir_from(ctx))  # status never creates anything
    status = server_status(data)
    if json_out:
        print_json(status)
        return
    print_kv(
        [
            ("data_dir", status["data_dir"]),
            ("initialized", status["initialized"]),
            ("listen", status["listen"]),
            ("public_url", status["public_url"]),
            ("running", status["running"]),
            ("ready", (status.get("ready") or {}).get("body", {}) if status["running"] else "-"),
            ("open enrollment codes", status["enrollment"]["open_codes"]),
            ("active clients", status["enrollment"]["active_clients"]),
            ("web grants", status["web_access"]["active_grants"]),
        ]
    )
