"""`ivoai skills list|show|add|remove|enable|disable|pin|unpin|update|rollback|doctor|select`."""

from __future__ import annotations

from typing import Any

import typer

from ivoai.cli._output import info, print_json, print_kv, print_table

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Skills: a local registry with deny-by-default policy and non-executing staging.",
)

JSON_OPT = typer.Option(False, "--json", help="Machine-readable output.")
NAME_ARG = typer.Argument(..., help="Skill name.")


def _service() -> Any:
    from ivoai.cli._context import client_context
    from ivoai.client.skills.service import SkillService

    return SkillService(client_context().paths)


def _short(digest: str | None) -> str:
    return digest[7:19] if digest else ""


def _done(result: dict[str, Any], json_out: bool, message: str) -> None:
    if json_out:
        print_json(result)
    else:
        info(message)


@app.command("list")
def list_command(json_out: bool = JSON_OPT) -> None:
    """Every skill with its state, policy decision and the reason when it is not allowed."""
    rows = _service().list_skills()
    if json_out:
        print_json({"schema": 1, "skills": rows})
        return
    print_table(
        "skills",
        ["name", "source", "state", "enabled", "version", "decision", "risk", "digest", "reason"],
        [
            [r["name"], r["source"], r["state"], "yes" if r["enabled"] else "no", r["version"] or "",
             r["decision"] or "", r["risk"] or "", _short(r["digest"]), r["reason"] or ""]
            for r in rows
        ],
    )  # fmt: skip


@app.command("show")
def show_command(name: str = NAME_ARG, json_out: bool = JSON_OPT) -> None:
    """One skill: source, flags, versions, and the policy decision with every reason."""
    doc = _service().show(name)
    if json_out:
        print_json(doc)
        return
    source = doc["source"]
    print_kv(
        [
            ("name", doc["name"]),
            ("source", f"{source['kind']} {source['location']}"),
            ("enabled", doc["enabled"]),
            ("pinned", doc["pinned"]),
        ]
    )
    for version in doc["versions"]:
        meta = version.get("meta") or {}
        policy = version.get("policy") or {}
        print_kv(
            [
                (
                    "version",
                    f"{version['state']} {meta.get('version') or ''} {_short(version.get('digest'))}",
                ),
                ("  description", meta.get("description")),
                ("  decision", f"{policy.get('decision')} (risk {policy.get('risk')})" if policy else None),
                *[("  reason", r) for r in policy.get("reasons", [])],
                *([("  quarantined", version["reason"])] if version.get("reason") else []),
                *([("  directory", version["directory"])] if version.get("directory") else []),
            ]
        )


@app.command("add")
def add_command(
    source: str = typer.Argument(
        ..., help="A local directory, a git repository (with --commit) or an archive."
    ),
    commit: str | None = typer.Option(None, "--commit", help="Git source: the full commit ID to stage."),
    sha256: str | None = typer.Option(
        None, "--sha256", help="Archive source (path or https URL): its SHA-256."
    ),
    kind: str | None = typer.Option(
        None, "--kind", help="dir, git or archive (default: from --commit/--sha256)."
    ),
    path: str | None = typer.Option(None, "--path", help="Only stage this subdirectory of the source."),
    stage: bool = typer.Option(False, "--stage", help="Store and validate, but do not activate."),
    json_out: bool = JSON_OPT,
) -> None:
    """Stage a source without executing anything; store its valid skills, quarantine the rest."""
    from ivoai.client.skills.service import make_source

    report = _service().add(
        make_source(source, kind=kind, commit=commit, sha256=sha256, subdir=path), stage_only=stage
    )
    if json_out:
        print_json(report)
    else:
        for item in report["added"]:
            policy = item["policy"]
            info(
                f"{item['state']}: {item['name']} {item['version'] or ''} ({item['files']} files, "
                f"{_short(item['digest'])}) policy {policy['decision']} risk {policy['risk']}"
            )
        for item in report["quarantined"]:
            info(f"quarantined: {item['name'] or item['path']}: {item['reason']}")
    if not report["ok"]:
        raise typer.Exit(1)


@app.command("update")
def update_command(
    name: str = NAME_ARG,
    commit: str | None = typer.Option(None, "--commit", help="Git source: the new full commit ID."),
    sha256: str | None = typer.Option(None, "--sha256", help="Archive source: the new archive's SHA-256."),
    location: str | None = typer.Option(None, "--source", help="A new location for the same source kind."),
    json_out: bool = JSON_OPT,
) -> None:
    """Stage a new version; it becomes active only if valid (the old one is kept for rollback)."""
    result = _service().update(name, commit=commit, sha256=sha256, location=location)
    if result["changed"]:
        message = f"{name}: active {_short(result['digest'])} (previous {_short(result['previous'])})"
    else:
        message = f"{name}: already at {_short(result['digest'])}"
    _done(result, json_out, message)


@app.command("rollback")
def rollback_command(name: str = NAME_ARG, json_out: bool = JSON_OPT) -> None:
    """Make the previous version active again (its stored tree is verified first)."""
    result = _service().rollback(name)
    _done(result, json_out, f"{name}: active {_short(result['digest'])} again")


@app.command("remove")
def remove_command(name: str = NAME_ARG, json_out: bool = JSON_OPT) -> None:
    """Forget a skill and delete its stored versions."""
    result = _service().remove(name)
    _done(result, json_out, f"{name}: removed")


@app.command("enable")
def enable_command(
    name: str = NAME_ARG,
    approve: bool = typer.Option(False, "--approve", help="Approve the active version (HIGH risk needs it)."),
    risk: str | None = typer.Option(
        None, "--risk", help="Your own risk level: low, moderate, high, critical."
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Enable a skill (activating a staged version if needed)."""
    result = _service().enable(name, approve=approve, risk=risk)
    policy = result.get("policy")
    suffix = f"; policy {policy['decision']} risk {policy['risk']}" if policy else ""
    _done(result, json_out, f"{name}: enabled{suffix}")


@app.command("disable")
def disable_command(name: str = NAME_ARG, json_out: bool = JSON_OPT) -> None:
    """Disable a skill: kept, but never attached or selected."""
    _done(_service().disable(name), json_out, f"{name}: disabled")


@app.command("pin")
def pin_command(name: str = NAME_ARG, json_out: bool = JSON_OPT) -> None:
    """Pin the active version: `update` refuses until `unpin`."""
    result = _service().pin(name, True)
    _done(result, json_out, f"{name}: pinned at {_short(result['digest'])}")


@app.command("unpin")
def unpin_command(name: str = NAME_ARG, json_out: bool = JSON_OPT) -> None:
    """Allow `update` again."""
    _done(_service().pin(name, False), json_out, f"{name}: unpinned")


@app.command("doctor")
def doctor_command(json_out: bool = JSON_OPT) -> None:
    """Check modes, the registry, every stored tree against its digest, and resolution."""
    report = _service().doctor()
    if json_out:
        print_json(report)
    else:
        for problem in report["problems"]:
            info(f"problem: {problem}")
        for warning in report["warnings"]:
            info(f"warning: {warning}")
        usable = sum(1 for s in report["skills"] if s["usable"])
        info(
            f"skills: {usable} usable of {len(report['skills'])} active; {'ok' if report['ok'] else 'FAILED'}"
        )
    if not report["ok"]:
        raise typer.Exit(1)


@app.command("select")
def select_command(
    role: str = typer.Option(..., "--role", help="AUTO worker role (research, review, ...)."),
    tier: str = typer.Option(..., "--tier", help="LIGHT, BALANCED, STRONG or MAX."),
    executor: str = typer.Option(..., "--executor", help="codex, claude or opencode."),
    capability: list[str] | None = typer.Option(None, "--capability", help="A capability the worker has."),
    phase: str | None = typer.Option(None, "--phase", help="The task's phase, if skills declare phases."),
    json_out: bool = JSON_OPT,
) -> None:
    """What an AUTO worker with these facts would get, and why every other candidate is left out."""
    from ivoai.cli._context import client_context
    from ivoai.client.skills.select import select_for_worker

    result = select_for_worker(
        role, tier, executor, capability or (), phase=phase, paths=client_context().paths
    )
    if json_out:
        print_json({"schema": 1, **result.to_json()})
        return
    rows = [
        [c.name, c.meta.version or "", c.policy.risk.name if c.policy.risk is not None else "", c.directory]
        for c in result.selected
    ]
    print_table("selected", ["name", "version", "risk", "directory"], rows)
    for excluded in result.excluded:
        info(f"left out: {excluded.name} ({excluded.code}): {excluded.reason}")
