"""`ivoai memory hooks …`: the managed memory-hook installation, its status, and the spool's flush.

(`ivoai memory hook EVENT`, run by the hosts themselves, never reaches Typer: see `ivoai.cli.main`.)
"""

from __future__ import annotations

import sys
import time
from typing import Any

import typer

from ivoai.cli._output import info, print_json, print_kv, print_table
from ivoai.common.errors import UsageError

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Memory for Codex and Claude Code.")
hooks_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Memory hooks: Codex/Claude lifecycle events into the memory server, fail-safe.",
)
app.add_typer(hooks_app, name="hooks")

JSON_OPT = typer.Option(False, "--json", help="Machine-readable output.")
CLIENT_OPT = typer.Option(None, "--client", help="codex or claude (default: each one installed here).")


def _clients(client: str | None) -> list[str]:
    from ivoai.client.memoryhooks.hosts import CLIENTS
    from ivoai.client.memoryhooks.install import default_clients

    if client is None:
        found = default_clients()
        if not found:
            raise UsageError("neither codex nor claude is installed here; name one with --client")
        return found
    if client not in CLIENTS:
        raise UsageError(f"--client must be one of {', '.join(CLIENTS)}, not {client!r}")
    return [client]


def _when(ts: Any) -> str:
    if not isinstance(ts, int | float):
        return "never"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _render_results(results: list[Any], json_out: bool) -> None:
    if json_out:
        print_json({"clients": [r.to_dict() for r in results]})
        return
    for r in results:
        what = {
            "installed": f"installed {len(r.added)} hook(s)",
            "already_installed": "already installed (nothing changed)",
            "repaired": "repaired"
            + (f": re-added {', '.join(r.added)}" if r.added else "")
            + (f"; replaced {', '.join(r.replaced)}" if r.replaced else "")
            + ("; wrapper rewritten" if r.wrapper_rewritten else ""),
            "removed": "removed ivoai's hooks"
            + (" and the file ivoai had created" if r.deleted_file else ""),
            "not_installed": "nothing of ivoai's recorded",
        }.get(r.action, r.action)
        info(f"{r.client}: {what} ({r.file}; unrelated settings untouched)")
        for note in r.notes:
            info(f"  note: {note}")
        if r.client == "codex" and r.action in ("installed", "repaired") and r.added:
            info("  codex runs new hooks only after you trust them: open `/hooks` in Codex once")


@hooks_app.command("install")
def install_command(client: str | None = CLIENT_OPT, json_out: bool = JSON_OPT) -> None:
    """Add ivoai's hooks to the clients' own configuration (for running codex/claude directly)."""
    from ivoai.cli._context import client_context
    from ivoai.client.memoryhooks.install import install

    paths = client_context().paths
    _render_results([install(c, paths) for c in _clients(client)], json_out)


@hooks_app.command("repair")
def repair_command(client: str | None = CLIENT_OPT, json_out: bool = JSON_OPT) -> None:
    """Rewrite a stale wrapper; re-add missing or altered hooks (intact ones keep their trust)."""
    from ivoai.cli._context import client_context
    from ivoai.client.memoryhooks.install import repair

    paths = client_context().paths
    _render_results([repair(c, paths) for c in _clients(client)], json_out)


@hooks_app.command("uninstall")
def uninstall_command(client: str | None = CLIENT_OPT, json_out: bool = JSON_OPT) -> None:
    """Remove exactly what ivoai added (recorded in the ownership manifest); nothing else."""
    from ivoai.cli._context import client_context
    from ivoai.client.memoryhooks.hosts import CLIENTS
    from ivoai.client.memoryhooks.install import remove_wrapper, uninstall

    paths = client_context().paths
    clients = list(CLIENTS) if client is None else _clients(client)
    results = [uninstall(c, paths) for c in clients]
    remove_wrapper(paths)
    _render_results(results, json_out)


@hooks_app.command("status")
def status_command(
    client: str | None = CLIENT_OPT,
    no_probe: bool = typer.Option(False, "--no-probe", help="Do not ask codex about hook trust."),
    json_out: bool = JSON_OPT,
) -> None:
    """Per client: installed, trusted (when the host can tell), last event sent, spool, last error."""
    from ivoai.cli._context import client_context
    from ivoai.client.memoryhooks.hosts import CLIENTS
    from ivoai.client.memoryhooks.install import status

    paths = client_context().paths
    clients = list(CLIENTS) if client is None else _clients(client)
    rows = [status(c, paths, probe=not no_probe) for c in clients]
    if json_out:
        print_json({"clients": rows})
        return
    print_table(
        "memory hooks",
        ["client", "installed", "trusted", "last event sent", "spool", "last error"],
        [
            [
                r["client"],
                r["state"],
                {True: "yes", False: "no", None: "-"}[r["trusted"]],
                _when(r["last_event_sent_at"]),
                f"{r['spool']['pending_events']} events, {r['spool']['bytes']} B"
                + (f", {r['spool']['evicted_events']} evicted" if r["spool"]["evicted_events"] else ""),
                (r["last_error"] or {}).get("message", "-") if r["last_error"] else "-",
            ]
            for r in rows
        ],
    )
    for r in rows:
        if r["trusted"] is False:
            sys.stdout.write(f"{r['client']}: {r['trust_detail']}\n")


@hooks_app.command("validate")
def validate_command(client: str | None = CLIENT_OPT, json_out: bool = JSON_OPT) -> None:
    """Check the files, ivoai's definitions, the wrapper, and that the real client accepts them."""
    from ivoai.cli._context import client_context
    from ivoai.client.memoryhooks.install import validate

    paths = client_context().paths
    reports = [validate(c, paths) for c in _clients(client)]
    if json_out:
        print_json({"ok": all(r["ok"] for r in reports), "clients": reports})
    else:
        for r in reports:
            for c in r["checks"]:
                sys.stdout.write(
                    f"{r['client']}: {'ok  ' if c['ok'] else 'FAIL'} {c['name']}: {c['detail']}\n"
                )
    if not all(r["ok"] for r in reports):
        raise typer.Exit(1)


@hooks_app.command("flush")
def flush_command(json_out: bool = JSON_OPT) -> None:
    """Send spooled events now (waits for a running flusher; ignores the retry backoff)."""
    from ivoai.cli._context import client_context
    from ivoai.client.memoryhooks.flusher import flush_now

    report = flush_now(client_context().paths)
    if json_out:
        print_json(report.to_dict())
    else:
        print_kv(
            [
                ("sent", report.sent),
                ("duplicates", report.duplicates),
                ("rejected", report.rejected),
                ("corrupt lines skipped", report.corrupt),
                ("error", report.error or "-"),
            ]
        )
    if report.error:
        raise typer.Exit(1)


@hooks_app.command("destination")
def destination_command(
    source: str | None = typer.Argument(None, help="A memory source ID or alias (see `ivoai knowledge`)."),
    clear: bool = typer.Option(False, "--clear", help="Forget the choice (use the only memory source)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Where hook events from outside ivoai sessions go when several memory sources are enrolled."""
    from ivoai.cli._context import client_context
    from ivoai.client.memoryhooks.config import get_destination, set_destination

    paths = client_context().paths
    if source is not None or clear:
        if source is not None and clear:
            raise UsageError("give a SOURCE or --clear, not both")
        set_destination(source, paths)
    current = get_destination(paths)
    if json_out:
        print_json({"destination": current})
    else:
        info(f"hook destination: {current or 'the only enrolled memory source'}")
