"""`ivoai status` (cheap summary, no probes) and `ivoai doctor` (every path, versions, components)."""

from __future__ import annotations

import sys
from typing import Any

import typer

from ivoai.cli._output import is_tty, print_json, print_kv, print_table

_JSON = typer.Option(False, "--json", help="Machine-readable output (stable schema).")


def _section(title: str, *, table: bool = False) -> None:
    # On a TTY a table carries its own title.
    if not (table and is_tty()):
        sys.stdout.write(f"\n{title}\n")


def _show(value: Any) -> str:
    return "-" if value is None else str(value)


def _origin(exe: dict[str, Any]) -> str:
    if exe["origin"] == "missing":
        return "not installed"
    pin = f" (pin {exe['managed_version']})" if exe["origin"] == "managed" and exe["managed_version"] else ""
    return f"{exe['origin']}{pin}: {exe['path']}"


def status_command(json_out: bool = _JSON) -> None:
    """Show ivoai's state: identity, paths, requested compression, stored counts."""
    from ivoai.cli._context import client_context
    from ivoai.client.doctor import collect_status

    data = collect_status(client_context().paths)
    if json_out:
        print_json(data)
    else:
        print_kv(
            [
                ("version", data["version"]),
                ("identity", _show(data["identity"])),
                (
                    "compression",
                    f"{_show(data['config']['compression_provider'])} "
                    f"({_show(data['config']['compression_source'])})",
                ),
                ("config", data["config"]["status"]),
                ("secrets", _show(data["secrets"]["count"])),
                ("ownership entries", data["ownership"]["count"]),
                *(  # issue 17: the managed pin or the PATH executable a session would run
                    (name, _origin(v)) for name, v in data["executables"].items()
                ),
                *(
                    (f"{name} dir", f"{p['path']}{'' if p['status'] == 'ok' else ' (' + p['status'] + ')'}")
                    for name, p in data["paths"].items()
                ),
            ]
        )
        for problem in data["problems"]:
            sys.stderr.write(f"ivoai: problem: {problem}\n")
        if data["problems"]:
            sys.stderr.write("ivoai: `ivoai doctor` shows every path and check\n")
    if not data["ok"]:
        raise typer.Exit(1)


def doctor_command(
    json_out: bool = _JSON,
    refresh: bool = typer.Option(False, "--refresh", help="Probe servers now (results are cached 1 min)."),
) -> None:
    """Check paths, versions, config, identity, components and every enrolled server (read-only)."""
    from ivoai.cli._context import client_context
    from ivoai.client.doctor import run_doctor

    report = run_doctor(client_context().paths, refresh=refresh)
    if json_out:
        print_json(report.to_dict())
    else:
        _render_doctor(report.to_dict())
    if not report.ok:
        raise typer.Exit(1)


def _render_doctor(doc: dict[str, Any]) -> None:
    print_kv(sorted(doc["versions"].items()))
    _section("identity")
    print_kv(
        [("identity", _show(doc["identity"].get("identity"))), ("kind", _show(doc["identity"].get("kind")))]
    )
    _section("paths", table=True)
    print_table(
        "paths",
        ["name", "path", "expected", "mode", "status", "problem"],
        [
            [p["name"], p["path"], p["expected"], p["mode"] or "-", p["status"], p["problem"] or ""]
            for p in doc["paths"]
        ],
    )
    _section("config")
    if doc["config"]["status"] == "error":
        print_kv([("status", "error"), ("error", doc["config"]["error"])])
    else:
        print_kv([("status", doc["config"]["status"])])
        print_kv((k, f"{_show(v['value'])} ({v['origin']})") for k, v in doc["config"]["values"].items())
    _section("state")
    print_kv(
        [
            ("secrets", f"{doc['secrets']['status']}, {_show(doc['secrets']['count'])} stored"),
            ("ownership", f"{doc['ownership']['status']}, {len(doc['ownership']['entries'])} entries"),
        ]
    )
    _section("components", table=True)
    print_table(
        "components",
        ["component", "kind", "installed", "available", "health", "version", "active", "reason"],
        [
            [
                c["component"],
                c["kind"],
                c["installed"].replace("_", " "),
                c["available"].replace("_", " "),
                c["health"]["state"].replace("_", " "),
                c["version"] or "unknown" if c["installed"] == "yes" else c["version"] or "-",
                c["active"].replace("_", " "),
                c["reason"] or "",
            ]
            for c in doc["components"]
        ],
    )
    _render_servers(doc.get("servers", []))
    for r in doc["providers"]:
        if r["status"] != "ok":
            sys.stdout.write(f"provider {r['provider']}: {r['status'].replace('_', ' ')}\n")
    if doc["problems"]:
        _section("problems")
        for line in doc["problems"]:
            sys.stdout.write(f"- {line}\n")
    else:
        sys.stdout.write("\nno problems found\n")


def _render_servers(servers: list[dict[str, Any]]) -> None:
    """Enrolled servers (issue 18): reachability, TLS, protocol, credential, service health."""
    if not servers:
        return
    _section("servers", table=True)
    print_table(
        "servers",
        ["server", "enabled", "reachable", "tls", "protocol", "credential", "context", "memory", "ms"],
        [
            [
                s.get("alias", "-"),
                "yes" if s.get("enabled") else "no",
                {True: "yes", False: "no", None: "-"}[s.get("reachable")],
                str(s.get("tls", "-")).replace("_", " "),
                _show(s.get("protocol")) + ("" if s.get("protocol_ok") in (True, None) else " (unsupported)"),
                str(s.get("credential", "-")).replace("_", " "),
                _show(s.get("context")),
                _show(s.get("memory")),
                _show(s.get("latency_ms")) + (" (cached)" if s.get("cached") else ""),
            ]
            for s in servers
            if "alias" in s
        ],
    )
