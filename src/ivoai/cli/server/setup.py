"""`ivoai server setup --render DIR | --apply [--root DIR]`: systemd units, layout and Compose file."""

from __future__ import annotations

from pathlib import Path

import typer

from ivoai.cli._output import info, print_json, print_result


def setup_command(
    render_dir: Path | None = typer.Option(
        None, "--render", help="Write the deployment below DIR to review."
    ),
    apply_: bool = typer.Option(False, "--apply", help="Install it (root only; the plan is printed first)."),
    root: Path = typer.Option(Path("/"), "--root", help="With --apply: install into this root (an image)."),
    public_url: str = typer.Option(
        "https://localhost", "--public-url", help="Canonical public origin, e.g. https://ai.example.com."
    ),
    mode: str = typer.Option("embedded", "--mode", help="embedded (one process) or services (TEI + Qdrant)."),
    listen: str = typer.Option("127.0.0.1:7744", "--listen", help="Gateway HOST:PORT (behind a TLS proxy)."),
    workers: int = typer.Option(1, "--workers", help="Gateway processes (services mode only for > 1)."),
    tls_cert: Path | None = typer.Option(
        None, "--tls-cert", help="PEM chain for direct TLS (a service-owned copy)."
    ),
    tls_key: Path | None = typer.Option(
        None, "--tls-key", help="PEM key for direct TLS (a service-owned copy)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Render systemd units, the /etc/ivoai + /var/lib/ivoai layout and (services) a Compose file."""
    from ivoai.common.errors import UsageError
    from ivoai.server.deploy.render import RenderOptions

    if (render_dir is None) == (not apply_):
        raise UsageError("give exactly one of --render DIR or --apply")
    opts = RenderOptions(
        public_url=public_url,
        mode=mode,  # type: ignore[arg-type]
        listen=listen,
        workers=workers,
        tls_cert=tls_cert,
        tls_key=tls_key,
    )
    if render_dir is not None:
        from ivoai.server.deploy.render import read_existing_secrets, render, write_render

        out = render_dir.absolute()
        listing = write_render(render(opts, existing_secrets=read_existing_secrets(out)), out)
        if json_out:
            print_json({"render_dir": str(out), "mode": mode, "files": listing})
            return
        for f in listing:
            info(f"{f['path']}  ({f['mode']} {f['owner']})")
        info(f"rendered below {out}; review, then run as root: ivoai server setup --apply --mode {mode}")
        return
    from ivoai.server.deploy.apply import apply, plan

    steps, _ = plan(opts, root)
    info("plan:")
    for step in steps:
        info(f"  {step.action}: {step.detail}")
    done = apply(opts, root, announce=None if json_out else info)
    print_result(
        {"root": str(root), "mode": mode, "steps": done},
        json_out,
        "installed; see `ivoai server status` and `ivoai server logs`",
    )
