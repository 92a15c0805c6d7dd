"""`ivoai connect chatgpt|claude|server …|mcp …` and `ivoai disconnect …` (thin: parse, call, render)."""

from __future__ import annotations

import sys
from typing import Any

import typer

from ivoai.cli._context import client_context
from ivoai.cli._output import info, print_json, print_kv, print_result, print_table
from ivoai.common.errors import UsageError

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Connect official logins, ivoai servers and MCP servers."
)
server_app = typer.Typer(no_args_is_help=True, add_completion=False, help="Enroll and manage ivoai servers.")
mcp_app = typer.Typer(no_args_is_help=True, add_completion=False, help="User-added HTTP MCP servers.")
app.add_typer(server_app, name="server")
app.add_typer(mcp_app, name="mcp")

JSON_OPT = typer.Option(False, "--json", help="Machine-readable output.")


def _read_secret(from_stdin: bool, prompt: str, flag: str) -> str:
    """One line from stdin (`flag`) or a no-echo prompt on a terminal; never from argv."""
    if from_stdin:
        line = sys.stdin.readline(8192)
        return line.strip()
    if sys.stdin.isatty():
        import getpass

        return getpass.getpass(prompt)
    raise UsageError(f"no terminal to prompt on: pipe the value on standard input with {flag}")


def profile_view(profile: Any, probe: str = "not_probed") -> dict[str, Any]:
    """The JSON shape of one server profile (no credential)."""
    return {
        "id": profile.id,
        "alias": profile.alias,
        "url": profile.base_url,
        "purpose": profile.purpose,
        "redundancy_group": profile.redundancy_group,
        "priority": profile.priority,
        "enabled": profile.enabled,
        "client_id": profile.client_id,
        "scopes": list(profile.scopes),
        "protocol_version": profile.protocol_version,
        "server_version": profile.server_version,
        "kinds": sorted(profile.kinds),
        "endpoints": dict(profile.endpoints),
        "features": dict(profile.features),
        "enrolled_at": profile.enrolled_at,
        "warnings": list(profile.warnings),
        "probe": probe,
    }


def _official(provider: str, check: bool, json_out: bool) -> None:
    from ivoai.client.connections import manage, official

    status = official.connect(provider, check_only=check)  # type: ignore[arg-type]
    manage.record_official(client_context().paths, provider, status.detail)  # type: ignore[arg-type]
    data = {
        "provider": provider,
        "logged_in": True,
        "detail": status.detail,
        "ran_login": status.ran_login,
        "binary": status.binary,
    }
    print_result(
        data,
        json_out,
        f"{provider}: logged in through the official client ({status.detail}); ivoai stores no credential",
    )


@app.command("chatgpt")
def connect_chatgpt(
    check: bool = typer.Option(False, "--check", help="Only report the status; never start a login."),
    json_out: bool = JSON_OPT,
) -> None:
    """Log in to ChatGPT through the official `codex login` (then `codex login status`)."""
    _official("chatgpt", check, json_out)


@app.command("claude")
def connect_claude(
    check: bool = typer.Option(False, "--check", help="Only report the status; never start a login."),
    json_out: bool = JSON_OPT,
) -> None:
    """Log in to Claude through the official `claude auth status` / `claude auth login`."""
    _official("claude", check, json_out)


def _render_enrolled(result: Any, json_out: bool, verb: str) -> None:
    probes = {p.kind: ("ok" if p.ok else f"failed: {p.detail}") for p in result.probes}
    view = profile_view(result.profile, "probed")
    view["probes"] = probes
    if json_out:
        print_json(view)
    else:
        p = result.profile
        info(
            f"{verb} {p.alias} ({p.id}) at {p.base_url}; purpose {p.purpose}"
            + (f", redundancy group {p.redundancy_group}" if p.redundancy_group else "")
            + f", priority {p.priority}"
        )
        for kind, text in sorted(probes.items()):
            info(f"  {kind}: {text}")
    for warning in result.profile.warnings:
        info(f"warning: {warning}")


@server_app.command("add")
def server_add(
    alias: str = typer.Argument(..., help="Local name for this server."),
    url: str = typer.Option(..., "--url", help="Server base URL (https://…; http:// only for loopback)."),
    purpose: str | None = typer.Option(None, "--purpose", help="Purpose (defaults to the alias)."),
    group: str | None = typer.Option(
        None, "--redundancy-group", help="Replicas of one source share a group."
    ),
    priority: int = typer.Option(100, "--priority", help="Lower is tried first within a redundancy group."),
    code_stdin: bool = typer.Option(
        False, "--code-stdin", help="Read the one-time code from standard input."
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Enroll a server with a one-time code (stdin or a no-echo prompt; never an argument)."""
    from ivoai.client.connections.enroll import add_server

    code = _read_secret(code_stdin, "Enrollment code: ", "--code-stdin")
    result = add_server(
        client_context().paths,
        alias,
        url,
        code,
        purpose=purpose,
        group=group,
        priority=priority,
        progress=info,
    )
    _render_enrolled(result, json_out, "enrolled")


@server_app.command("re-enroll")
def server_re_enroll(
    alias: str = typer.Argument(...),
    code_stdin: bool = typer.Option(
        False, "--code-stdin", help="Read the one-time code from standard input."
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Exchange a new one-time code; the stored credential is replaced only if the exchange succeeds."""
    from ivoai.client.connections.enroll import re_enroll

    code = _read_secret(code_stdin, "Enrollment code: ", "--code-stdin")
    _render_enrolled(re_enroll(client_context().paths, alias, code, progress=info), json_out, "re-enrolled")


@server_app.command("list")
def server_list(json_out: bool = JSON_OPT) -> None:
    """Enrolled servers (no probing: status `not_probed`)."""
    from ivoai.client.connections.manage import list_servers

    profiles = list_servers(client_context().paths)
    if json_out:
        print_json({"servers": [profile_view(p) for p in profiles]})
        return
    print_table(
        "ivoai servers",
        ["alias", "url", "purpose", "group", "priority", "enabled", "kinds", "warnings"],
        [
            [
                p.alias,
                p.base_url,
                p.purpose,
                p.redundancy_group or "-",
                p.priority,
                "yes" if p.enabled else "no",
                ",".join(sorted(p.kinds)),
                len(p.warnings),
            ]
            for p in profiles
        ],
    )


@server_app.command("show")
def server_show(alias: str = typer.Argument(...), json_out: bool = JSON_OPT) -> None:
    """One enrolled server (no probing)."""
    from ivoai.client.connections.manage import show_server

    view = profile_view(show_server(client_context().paths, alias))
    if json_out:
        print_json(view)
    else:
        print_kv(
            (k, ", ".join(map(str, v)) if isinstance(v, list) else v)
            for k, v in view.items()
            if not isinstance(v, dict)
        )


@server_app.command("test")
def server_test(alias: str = typer.Argument(...), json_out: bool = JSON_OPT) -> None:
    """Live probe: discovery, readiness, then context and memory through MCP with the stored credential."""
    from ivoai.client.connections.enroll import probe_server

    result = probe_server(client_context().paths, alias)
    _render_enrolled(result, json_out, "tested")
    if not all(p.ok for p in result.probes if "feature off" not in p.detail):
        raise typer.Exit(1)


def _toggle(alias: str, enabled: bool) -> None:
    from ivoai.client.connections.manage import set_enabled

    profile = set_enabled(client_context().paths, alias, enabled)
    info(f"{profile.alias}: {'enabled' if enabled else 'disabled'}")


@server_app.command("enable")
def server_enable(alias: str = typer.Argument(...)) -> None:
    """Route to this server again."""
    _toggle(alias, True)


@server_app.command("disable")
def server_disable(alias: str = typer.Argument(...)) -> None:
    """Stop routing to this server (its credential is kept)."""
    _toggle(alias, False)


@server_app.command("remove")
def server_remove(alias: str = typer.Argument(...)) -> None:
    """Forget this server and its credential (the server-side client stays until revoked there)."""
    from ivoai.client.connections.manage import remove_server

    profile = remove_server(client_context().paths, alias)
    info(
        f"removed {profile.alias}; revoke its client on the server with `ivoai server clients revoke "
        f"{profile.client_id}`"
        if profile.client_id
        else f"removed {profile.alias}"
    )


@mcp_app.command("add")
def mcp_add(
    name: str = typer.Argument(...),
    url: str = typer.Argument(..., help="Streamable HTTP MCP URL (https://…; http:// only for loopback)."),
    token_stdin: bool = typer.Option(False, "--token-stdin", help="Read a bearer token from standard input."),
    json_out: bool = JSON_OPT,
) -> None:
    """Register a user HTTP MCP server (auth, if any, from stdin)."""
    from ivoai.client.connections.manage import add_mcp

    token = _read_secret(True, "", "--token-stdin") if token_stdin else None
    entry = add_mcp(client_context().paths, name, url, token)
    view = {
        "id": entry.id,
        "name": entry.name,
        "url": entry.url,
        "auth": entry.auth,
        "enabled": entry.enabled,
    }
    print_result(
        view, json_out, f"added MCP server {entry.name} ({entry.id}) at {entry.url}; auth: {entry.auth}"
    )


@mcp_app.command("list")
def mcp_list(json_out: bool = JSON_OPT) -> None:
    """Every MCP entry in the registry (ivoai servers' services and user-added servers)."""
    from ivoai.client.connections.registry import ConnectionRegistry

    entries = ConnectionRegistry(client_context().paths).load().entries()
    if json_out:
        print_json(
            {
                "entries": [
                    {
                        "id": e.id,
                        "name": e.name,
                        "kind": e.kind,
                        "transport": e.transport,
                        "url": e.url,
                        "argv": list(e.argv),
                        "scopes": list(e.scopes),
                        "ownership": e.ownership,
                        "enabled": e.enabled,
                        "authenticated": e.secret_id is not None,
                    }
                    for e in entries
                ]
            }
        )
        return
    print_table(
        "MCP entries",
        ["name", "kind", "url", "ownership", "enabled"],
        [
            [e.name, e.kind, e.url or " ".join(e.argv), e.ownership, "yes" if e.enabled else "no"]
            for e in entries
        ],
    )


@mcp_app.command("remove")
def mcp_remove(name: str = typer.Argument(...)) -> None:
    """Forget a user MCP server and its token."""
    from ivoai.client.connections.manage import remove_mcp

    info(f"removed MCP server {remove_mcp(client_context().paths, name).name}")


@mcp_app.command("enable")
def mcp_enable(name: str = typer.Argument(...)) -> None:
    """Offer this MCP server to sessions again."""
    from ivoai.client.connections.manage import set_mcp_enabled

    info(f"{set_mcp_enabled(client_context().paths, name, True).name}: enabled")


@mcp_app.command("disable")
def mcp_disable(name: str = typer.Argument(...)) -> None:
    """Stop offering this MCP server to sessions (its token is kept)."""
    from ivoai.client.connections.manage import set_mcp_enabled

    info(f"{set_mcp_enabled(client_context().paths, name, False).name}: disabled")


disconnect_command = typer.Typer(add_completion=False, help="Remove ivoai's own connection state.")


@disconnect_command.command()
def disconnect(
    target: str | None = typer.Argument(None, help="chatgpt, claude, server or mcp."),
    name: str | None = typer.Argument(None, help="The server alias or MCP name."),
    all_: bool = typer.Option(False, "--all", help="Remove every ivoai-owned connection."),
    json_out: bool = JSON_OPT,
) -> None:
    """Remove ivoai's own connection state; never logs the official clients out."""
    from ivoai.client.connections import manage, official

    paths = client_context().paths
    if all_:
        if target is not None:
            raise UsageError("--all takes no target")
        removed = manage.disconnect_all(paths)
        print_result(
            {"removed": removed},
            json_out,
            f"removed {len(removed['servers'])} server(s), {len(removed['mcp'])} MCP server(s) and "
            f"{len(removed['official'])} official-login note(s); official logins themselves are untouched",
        )
        return
    if target in ("chatgpt", "claude"):
        if name is not None:
            raise UsageError(f"`ivoai disconnect {target}` takes no name")
        existed = manage.forget_official(paths, target)  # type: ignore[arg-type]
        hint = official.logout_hint(target)  # type: ignore[arg-type]
        if json_out:
            print_json({"provider": target, "removed": existed})
        else:
            info(
                f"{target}: ivoai {'forgot its note' if existed else 'had nothing stored'}; "
                f"your official login is "
                f"untouched (log out with `{hint}`)"
            )
        return
    if target in ("server", "mcp"):
        if not name:
            raise UsageError(f"`ivoai disconnect {target}` needs a name")
        if target == "server":
            removed_name = manage.remove_server(paths, name).alias
        else:
            removed_name = manage.remove_mcp(paths, name).name
        if json_out:
            print_json({target: removed_name, "removed": True})
        else:
            info(f"removed {target} {removed_name}")
        return
    raise UsageError("usage: ivoai disconnect chatgpt|claude|server ALIAS|mcp NAME|--all")
