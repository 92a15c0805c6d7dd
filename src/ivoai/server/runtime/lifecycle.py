"""Server lifecycle: `init` (layout, config, modes) and `start` (settings -> app -> uvicorn)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ivoai.common.errors import ValidationError
from ivoai.server.config import MODES, load_config, update_config, write_default_config
from ivoai.server.datadir import ServerDataDir
from ivoai.server.gateway.settings import (
    GatewaySettings,
    normalize_public_url,
    parse_listen,
    parse_proxies,
)


def init_server(
    root: Path, *, listen: str | None = None, public_url: str | None = None, mode: str | None = None
) -> dict[str, Any]:
    """Create the data directory tree (0700) and a default `config.toml` (0600); idempotent.

    `mode` (`embedded` or `services`) sets the `[context]` backends; other keys are kept.

    Raises:
        ValidationError: a bad `listen`, `public_url` or `mode`.
    """
    if mode is not None and mode not in MODES:
        raise ValidationError(f"--mode: expected one of {', '.join(MODES)}, got {mode!r}")
    changes: dict[str, Any] = {}
    if listen is not None:
        host, port = parse_listen(listen)
        changes["listen"] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if public_url is not None:
        changes["public_url"] = normalize_public_url(public_url)
    data = ServerDataDir(root).ensure()
    created = write_default_config(data)
    if changes:
        update_config(data, changes)
    if mode is not None:
        update_config(data, MODES[mode], table_name="context")
    config = load_config(data)
    settings, context = config.gateway, config.context
    return {
        "data_dir": str(data.root),
        "config": str(data.config_file),
        "config_created": created,
        "listen": f"{settings.listen_host}:{settings.listen_port}",
        "public_url": settings.base_url,
        "context": {"embedder": context.embedder, "index": context.index},
    }


@dataclass(frozen=True)
class StartOptions:
    """Command-line overrides of `config.toml` for one `start`."""

    listen: str | None = None
    public_url: str | None = None
    trusted_proxies: tuple[str, ...] = ()
    tls_cert: Path | None = None
    tls_key: Path | None = None
    reingest_interval_seconds: int | None = None
    workers: int = 1  # > 1 only in services mode (gateway/workers.py)


def effective_settings(settings: GatewaySettings, options: StartOptions) -> GatewaySettings:
    """Config file settings with the command-line overrides applied, validated.

    Raises:
        ValidationError: the combination violates the transport policy.
    """
    if options.listen is not None:
        host, port = parse_listen(options.listen)
        settings = replace(settings, listen_host=host, listen_port=port)
    if options.public_url is not None:
        settings = replace(settings, public_url=normalize_public_url(options.public_url))
    if options.trusted_proxies:
        settings = replace(settings, trusted_proxies=parse_proxies(options.trusted_proxies))
    if options.tls_cert is not None or options.tls_key is not None:
        settings = replace(settings, tls_cert=options.tls_cert, tls_key=options.tls_key)
    if options.reingest_interval_seconds is not None:
        settings = replace(settings, reingest_interval_seconds=options.reingest_interval_seconds)
    settings.validate()
    return settings


def start_server(root: Path, options: StartOptions, *, announce: Callable[[str], None]) -> None:
    """Initialize if needed, then serve in the foreground until SIGINT/SIGTERM."""
    from ivoai.server.runtime.runner import serve_forever

    data = ServerDataDir(root).ensure()
    write_default_config(data)
    config = load_config(data)  # the one read of config.toml for this run, handed down from here
    settings = effective_settings(config.gateway, options)
    from ivoai.server.runtime.workers import check_workers

    check_workers(config.context, options.workers)
    serve_forever(data, replace(config, gateway=settings), announce=announce, workers=options.workers)
