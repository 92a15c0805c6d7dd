"""Deployment rendering: systemd units, the seed's filesystem layout and (services mode) a Compose file.

`render(options)` returns every file as an absolute install path with content, mode and owner;
`write_render(files, DIR)` writes them below DIR (DIR/etc/systemd/system/…, DIR/etc/ivoai/…), where
an operator can read them and `ivoai server setup --apply` installs them.

Layout (the seed's, mapped onto ivoai's one-root data directory with bind mounts):

    /etc/ivoai/config.toml          non-secret configuration; bound to /var/lib/ivoai/config.toml
    /etc/ivoai/secrets/             0700: API key files (0600) and tls/ copies; bound read-only to
                                    /var/lib/ivoai/secrets inside the units
    /etc/ivoai/compose.yaml         services mode: Qdrant and TEI (root-owned, read by Docker)
    /etc/ivoai/backends/*.env       services mode: 0600 env files with the generated API keys (root)
    /var/lib/ivoai/                 the data directory (0700): context/, memory/, index/,
                                    enrollment/, oauth/, run/, backups/ (ivoai-gateway)
    /var/lib/ivoai/qdrant*, models  services mode: vector index, snapshots, model (user ivoai)
    /run/ivoai/                     ephemeral runtime state

Users: `ivoai-gateway` owns the data directory and runs the gateway and the context/ingest worker;
`ivoai` runs the backend containers; both are non-login system users in the group `ivoai`.

Decision: the seed names a third user, `ivoai-context`, for the context process. ivoai's stores refuse
any file not owned by the process's own uid or readable by its group (`fsio.check_stat`), and the
context worker must write the same catalog the gateway reads (SQLite WAL readers need write access
to its -shm file). So the worker runs as `ivoai-gateway` and is isolated by its own sandbox instead:
only `context/` and `run/` are writable, `enrollment/`, `oauth/`, `memory/` and `backups/` are covered
by an empty read-only directory, and of the secrets it sees only the TEI and Qdrant key files.

Embedded mode renders the gateway unit only: Qdrant Edge opens its shard in one process, so the
periodic re-ingestion runs inside the gateway (`reingest_interval_seconds`). Services mode adds the
context/ingest worker (a oneshot `ivoai server ingest`) and the timer that starts it periodically.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from ivoai.common.errors import ValidationError
from ivoai.common.fsio import atomic_write_in_dir
from ivoai.common.limits import GATEWAY_DEFAULT_LISTEN, REINGEST_INTERVAL_DEFAULT_SECONDS
from ivoai.server.gateway.settings import normalize_public_url, parse_listen

Mode = Literal["embedded", "services"]

ETC = "/etc/ivoai"
SECRETS = f"{ETC}/secrets"
BACKENDS = f"{ETC}/backends"
DATA = "/var/lib/ivoai"
RUN = "/run/ivoai"
EMPTY = f"{DATA}/.sandbox-empty"  # an empty private directory bound read-only over what a unit must not see
UNIT_DIR = "/etc/systemd/system"
GROUP = "ivoai"
GATEWAY_USER = "ivoai-gateway"
BACKEND_USER = "ivoai"

# Images pinned by immutable digest (the seed's reviewed pins: Qdrant 1.19.0, TEI 1.9.3 CPU amd64).
QDRANT_IMAGE = "qdrant/qdrant:v1.19.0@sha256:057ee3a8da769fe7310dd3537b4dc7583bf87a95ce8ac43c0af5a46bc580d1fc"
TEI_IMAGE = (
    "ghcr.io/huggingface/text-embeddings-inference:cpu-1.9.3"
    "@sha256:ad950d30878eceb72aaf32024d26fa2b1d04a75304fa0b4776b49aa1941fea07"
)
TEI_MODEL_DIR = (
    "multilingual-e5-small"  # below /var/lib/ivoai/models (the pinned snapshot, placed by the operator)
)
QDRANT_PORT = 6333
TEI_PORT = 8080


@dataclass(frozen=True)
class RenderOptions:
    public_url: str
    mode: Mode = "embedded"
    listen: str = GATEWAY_DEFAULT_LISTEN
    workers: int = 1
    reingest_seconds: int = REINGEST_INTERVAL_DEFAULT_SECONDS
    python: str = sys.executable  # the interpreter of this ivoai installation (ExecStart)
    docker: str = shutil.which("docker") or "/usr/bin/docker"
    tls_cert: Path | None = None  # direct TLS: copied to /etc/ivoai/secrets/tls (owned by the service)
    tls_key: Path | None = None


@dataclass(frozen=True)
class RenderedFile:
    path: str  # absolute install path
    content: bytes
    mode: int
    owner: str
    group: str
    secret: bool = False  # generated credential: kept when already rendered, never printed


def validate_options(opts: RenderOptions) -> RenderOptions:
    """Normalize and check options (the public URL must be https unless loopback).

    Raises:
        ValidationError: bad mode, URL, listen address or worker count.
    """
    if opts.mode not in ("embedded", "services"):
        raise ValidationError(f"--mode: expected embedded or services, got {opts.mode!r}")
    if opts.workers < 1:
        raise ValidationError("--workers must be at least 1")
    if opts.mode == "embedded" and opts.workers > 1:
        raise ValidationError(
            "--workers > 1 needs --mode services: Qdrant Edge opens its shard in one process"
        )
    _host, port = parse_listen(opts.listen)
    if port < 1024:
        raise ValidationError(
            f"--listen port {port}: the units drop every capability, so use a port >= 1024 "
            "(put a TLS proxy on 443 in front, or forward 443 to it)"
        )
    url = normalize_public_url(opts.public_url)
    if (opts.tls_cert is None) != (opts.tls_key is None):
        raise ValidationError("--tls-cert and --tls-key must be given together")
    return replace(opts, public_url=url)


_HARDENING = """\
UMask=0077
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
PrivateUsers=yes
ProtectProc=invisible
ProcSubset=pid
CapabilityBoundingSet=
AmbientCapabilities=
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RemoveIPC=yes
DevicePolicy=closed
KeyringMode=private
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallFilter=~@privileged @resources @mount @obsolete @debug @cpu-emulation
SystemCallErrorNumber=EPERM
"""


def _gateway_unit(o: RenderOptions) -> str:
    start = f"{o.python} -m ivoai server --data-dir {DATA} start"
    if o.workers > 1:
        start += f" --workers {o.workers}"
    return f"""\
# Rendered by `ivoai server setup`: the ivoai gateway (one HTTPS origin: enrollment, context and
# memory MCP, Web MCP + OAuth). Edit /etc/ivoai/config.toml, not this file, for settings.
[Unit]
Description=ivoai gateway
After=network-online.target
Wants=network-online.target

[Service]
Type=exec
User={GATEWAY_USER}
Group={GROUP}
ExecStart={start}
Restart=on-failure
RestartSec=2s
TimeoutStopSec=20s
Environment=HOME={DATA}
Environment=PYTHONDONTWRITEBYTECODE=1
BindPaths={ETC}/config.toml:{DATA}/config.toml
BindReadOnlyPaths={SECRETS}:{DATA}/secrets
ReadWritePaths={DATA}/context {DATA}/memory {DATA}/index {DATA}/enrollment {DATA}/oauth {DATA}/run {RUN}
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
{_HARDENING}
[Install]
WantedBy=multi-user.target
"""


def _context_unit(o: RenderOptions) -> str:
    hidden = " ".join(f"{EMPTY}:{DATA}/{d}" for d in ("enrollment", "oauth", "memory", "backups"))
    return f"""\
# Rendered by `ivoai server setup --mode services`: the context/ingest worker. Reads connector roots,
# embeds through TEI and writes the catalog and the Qdrant collection; started by ivoai-reingest.timer.
[Unit]
Description=ivoai context ingestion worker
After=network-online.target ivoai-gateway.service
Wants=network-online.target

[Service]
Type=oneshot
User={GATEWAY_USER}
Group={GROUP}
ExecStart={o.python} -m ivoai server --data-dir {DATA} ingest
TimeoutStartSec=6h
Environment=HOME={DATA}
Environment=PYTHONDONTWRITEBYTECODE=1
BindReadOnlyPaths={ETC}/config.toml:{DATA}/config.toml
BindReadOnlyPaths={SECRETS}/qdrant.key:{DATA}/secrets/qdrant.key {SECRETS}/tei.key:{DATA}/secrets/tei.key
BindReadOnlyPaths={hidden}
ReadWritePaths={DATA}/context {DATA}/run
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
IPAddressAllow=localhost
IPAddressDeny=any
{_HARDENING}"""


def _timer_units(o: RenderOptions) -> tuple[str, str]:
    timer = f"""\
# Rendered by `ivoai server setup --mode services`: periodic re-ingestion of every connector.
[Unit]
Description=ivoai periodic re-ingestion

[Timer]
OnBootSec=2min
OnUnitInactiveSec={o.reingest_seconds}s
Unit=ivoai-context.service
Persistent=false

[Install]
WantedBy=timers.target
"""
    return "ivoai-reingest.timer", timer


def _config(o: RenderOptions) -> str:
    host, port = parse_listen(o.listen)
    listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    gateway_reingest = o.reingest_seconds if o.mode == "embedded" else 24 * 3600
    lines = [
        "# ivoai server configuration (rendered by `ivoai server setup`; non-secret settings only).",
        "[server]",
        f'listen = "{listen}"',
        f'public_url = "{o.public_url}"',
        "# The TLS-terminating proxy in front (loopback here); add its CIDR when it runs elsewhere.",
        "trusted_proxies = []",
        f'# Direct TLS instead of a proxy: service-owned copies, e.g. "{DATA}/secrets/tls/gateway.crt".',
        f'tls_cert = "{DATA + "/secrets/tls/gateway.crt" if o.tls_cert else ""}"',
        f'tls_key = "{DATA + "/secrets/tls/gateway.key" if o.tls_key else ""}"',
        "allowed_origins = []",
        "# Embedded mode: the gateway re-ingests (Qdrant Edge is single-process). Services mode: the",
        "# ivoai-reingest.timer does, and this is only a daily fallback.",
        f"reingest_interval_seconds = {gateway_reingest}",
        "",
        "[context]",
    ]
    if o.mode == "embedded":
        lines += ['embedder = "builtin"', 'index = "edge"']
    else:
        lines += [
            'embedder = "tei"',
            f'tei_url = "http://127.0.0.1:{TEI_PORT}"',
            'tei_api_key_file = "tei.key"',
            'index = "qdrant"',
            f'qdrant_url = "http://127.0.0.1:{QDRANT_PORT}"',
            'qdrant_api_key_file = "qdrant.key"',
        ]
    return "\n".join(lines) + "\n"


def _compose() -> str:
    """The Compose file (YAML is a superset of JSON: written as JSON, so no YAML writer is needed)."""
    import json

    hardening: dict[str, Any] = {
        "user": "${IVOAI_BACKEND_UID:?run ivoai server setup --apply}:${IVOAI_BACKEND_GID:?}",
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "restart": "unless-stopped",
        "tmpfs": ["/tmp:size=64m,mode=1777"],
        "networks": ["backend", "publish"],
    }
    doc = {
        "name": "ivoai",
        "services": {
            "qdrant": {
                "image": QDRANT_IMAGE,
                **hardening,
                "env_file": [f"{BACKENDS}/qdrant.env"],
                "environment": {"QDRANT__TELEMETRY_DISABLED": "true"},
                "volumes": [
                    f"{DATA}/qdrant:/qdrant/storage",
                    f"{DATA}/qdrant-snapshots:/qdrant/snapshots",
                    f"{DATA}/qdrant-init:/qdrant/init",
                ],
                # The gateway is a host process: a loopback-only port is unavoidable.
                "ports": [f"127.0.0.1:{QDRANT_PORT}:6333"],
            },
            "tei": {
                "image": TEI_IMAGE,
                "platform": "linux/amd64",
                **hardening,
                "env_file": [f"{BACKENDS}/tei.env"],
                "environment": {"HF_HUB_OFFLINE": "1"},
                "command": ["--model-id", f"/data/{TEI_MODEL_DIR}", "--port", "8080"],
                "volumes": [f"{DATA}/models:/data:ro"],
                "ports": [f"127.0.0.1:{TEI_PORT}:8080"],
            },
        },
        "networks": {
            # Between the backends only; no route out.
            "backend": {"internal": True},
            # Exists for the loopback port mappings; masquerading off, so it gives no egress either.
            "publish": {
                "driver": "bridge",
                "driver_opts": {"com.docker.network.bridge.enable_ip_masquerade": "false"},
            },
        },
    }
    return (
        "# Rendered by `ivoai server setup --mode services` (JSON is YAML).\n"
        + json.dumps(doc, indent=2)
        + "\n"
    )


def _sysusers() -> str:
    return f"""\
# Rendered by `ivoai server setup`: non-login system users in the shared group {GROUP}.
g {GROUP} -
u {GATEWAY_USER} -:{GROUP} "ivoai gateway and context worker" {DATA} /usr/sbin/nologin
u {BACKEND_USER} -:{GROUP} "ivoai backend containers" - /usr/sbin/nologin
"""


def _tmpfiles(o: RenderOptions) -> str:
    g, b = GATEWAY_USER, BACKEND_USER
    rows = [
        f"d {ETC} 0755 root root -",
        f"d {SECRETS} 0700 {g} {GROUP} -",
        f"d {SECRETS}/tls 0700 {g} {GROUP} -",
        f"d {DATA} 0700 {g} {GROUP} -",
        *(
            f"d {DATA}/{d} 0700 {g} {GROUP} -"
            for d in ("context", "memory", "index", "enrollment", "oauth", "run")
        ),
        f"d {DATA}/backups 0700 {g} {GROUP} -",
        f"d {RUN} 0700 {g} {GROUP} -",
        # mount points of the bind mounts (config and secrets live in /etc/ivoai)
        f"f {DATA}/config.toml 0600 {g} {GROUP} -",
        f"d {DATA}/secrets 0700 {g} {GROUP} -",
        f"d {EMPTY} 0500 {g} {GROUP} -",
    ]
    if o.mode == "services":
        rows += [
            f"d {BACKENDS} 0700 root root -",
            *(
                f"d {DATA}/{d} 0700 {b} {GROUP} -"
                for d in ("qdrant", "qdrant-snapshots", "qdrant-init", "models")
            ),
            # mount points of the context worker's two key files (the gateway sees all of secrets/)
            f"f {DATA}/secrets/qdrant.key 0600 {g} {GROUP} -",
            f"f {DATA}/secrets/tei.key 0600 {g} {GROUP} -",
        ]
    return "# Rendered by `ivoai server setup`: the seed's layout.\n" + "\n".join(rows) + "\n"


def render(opts: RenderOptions, *, existing_secrets: dict[str, bytes] | None = None) -> list[RenderedFile]:
    """Every file of the deployment (see module doc). Generated keys are reused from `existing_secrets`.

    Raises:
        ValidationError: invalid options.
    """
    o = validate_options(opts)
    keep = existing_secrets or {}
    root, g = "root", GATEWAY_USER
    files = [
        RenderedFile(f"{UNIT_DIR}/ivoai-gateway.service", _gateway_unit(o).encode(), 0o644, root, root),
        RenderedFile(f"{ETC}/config.toml", _config(o).encode(), 0o600, g, GROUP),
        RenderedFile("/usr/lib/sysusers.d/ivoai.conf", _sysusers().encode(), 0o644, root, root),
        RenderedFile("/usr/lib/tmpfiles.d/ivoai.conf", _tmpfiles(o).encode(), 0o644, root, root),
    ]
    if o.tls_cert is not None and o.tls_key is not None:
        for source, name in ((o.tls_cert, "gateway.crt"), (o.tls_key, "gateway.key")):
            files.append(
                RenderedFile(f"{SECRETS}/tls/{name}", _read_pem(source), 0o600, g, GROUP, secret=True)
            )
    if o.mode == "services":
        name, timer = _timer_units(o)
        files += [
            RenderedFile(f"{UNIT_DIR}/ivoai-context.service", _context_unit(o).encode(), 0o644, root, root),
            RenderedFile(f"{UNIT_DIR}/{name}", timer.encode(), 0o644, root, root),
            RenderedFile(f"{ETC}/compose.yaml", _compose().encode(), 0o644, root, root),
        ]
        for service, env_name in (("qdrant", "QDRANT__SERVICE__API_KEY"), ("tei", "API_KEY")):
            key_path = f"{SECRETS}/{service}.key"
            key = keep.get(key_path) or (secrets.token_urlsafe(32) + "\n").encode()
            files.append(RenderedFile(key_path, key, 0o600, g, GROUP, secret=True))
            value = key.decode().strip()
            env = f"# generated API key for {service} (same as {key_path})\n{env_name}={value}\n"
            files.append(
                RenderedFile(f"{BACKENDS}/{service}.env", env.encode(), 0o600, root, root, secret=True)
            )
    return files


def _read_pem(path: Path) -> bytes:
    """A certificate or key file to copy (bounded; must look like PEM)."""
    from ivoai.common.limits import TLS_PEM_MAX_BYTES

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"{path}: {exc.strerror}") from None
    if len(data) > TLS_PEM_MAX_BYTES or b"-----BEGIN " not in data:
        raise ValidationError(f"{path}: not a PEM file of at most {TLS_PEM_MAX_BYTES} bytes")
    return data


def read_existing_secrets(out_dir: Path) -> dict[str, bytes]:
    """Keys rendered earlier into `out_dir` (so rendering again does not rotate them)."""
    found: dict[str, bytes] = {}
    for service in ("qdrant", "tei"):
        install = f"{SECRETS}/{service}.key"
        p = out_dir / install.lstrip("/")
        if p.is_file() and not p.is_symlink():
            found[install] = p.read_bytes()
    return found


def write_render(files: list[RenderedFile], out_dir: Path) -> list[dict[str, Any]]:
    """Write `files` below `out_dir` (directories 0755, or 0700 for secret ones); return a listing."""
    listing = []
    for f in files:
        dest = out_dir / f.path.lstrip("/")
        private = "/secrets" in f.path or f.path.startswith(BACKENDS)
        _mkdirs(out_dir, dest.parent, 0o700 if private else 0o755)
        atomic_write_in_dir(dest, f.content, mode=f.mode)
        listing.append(
            {
                "path": f.path,
                "file": str(dest),
                "mode": f"{f.mode:04o}",
                "owner": f"{f.owner}:{f.group}",
                "secret": f.secret,
            }
        )
    return listing


def _mkdirs(base: Path, directory: Path, mode: int) -> None:
    rel = directory.relative_to(base)
    current = base
    current.mkdir(parents=True, exist_ok=True)
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            raise ValidationError(f"{current} is a symlink; refusing to render through it")
        if not current.exists():
            os.mkdir(current, mode)
        if part in ("secrets", "backends"):
            os.chmod(current, 0o700)
