"""`ivoai skills ...`: every command with --json, exit codes, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from ivoai.common.paths import XdgPaths
from tests.client.skills.helpers import write_skill
from tests.conftest import CliRunner


def _json(result: object) -> dict[str, object]:
    doc: dict[str, object] = json.loads(result.out)  # type: ignore[attr-defined]
    return doc


def test_the_whole_lifecycle_through_the_cli(cli: CliRunner, xdg: XdgPaths, tmp_path: Path) -> None:
    src = write_skill(tmp_path, "helper", "version: 1.0.0\nroles: [review]\nrisk: high\n", body="v1\n")
    added = cli("skills", "add", str(src), "--json")
    assert added.code == 0, added.err
    doc = _json(added)
    assert doc["ok"] is True and doc["added"][0]["policy"]["decision"] == "REQUIRE_APPROVAL"  # type: ignore[index]

    listed = _json(cli("skills", "list", "--json"))
    rows = {r["name"]: r for r in listed["skills"]}  # type: ignore[attr-defined]
    assert rows["helper"]["decision"] == "REQUIRE_APPROVAL"
    assert (
        rows["helper"]["reason"] == "HIGH risk requires your approval: ivoai skills enable helper --approve"
    )
    assert rows["ivoai-memory-context"]["source"] == "builtin"

    select = _json(
        cli("skills", "select", "--role", "review", "--tier", "STRONG", "--executor", "claude", "--json")
    )
    assert select["selected"] == [] and select["excluded"][0]["code"] == "needs_approval"  # type: ignore[index]
    assert cli("skills", "enable", "helper", "--approve").code == 0
    select = _json(
        cli("skills", "select", "--role", "review", "--tier", "STRONG", "--executor", "claude", "--json")
    )
    assert [s["name"] for s in select["selected"]] == ["helper"]  # type: ignore[attr-defined]
    light = _json(
        cli("skills", "select", "--role", "review", "--tier", "LIGHT", "--executor", "claude", "--json")
    )
    reasons = {e["name"]: e["reason"] for e in light["excluded"]}  # type: ignore[attr-defined]
    assert reasons == {
        "helper": "risk HIGH is above the ceiling LOW",
        "ivoai-memory-context": "needs capability context, mcp, memory this session lacks",
    }

    assert _json(cli("skills", "pin", "helper", "--json"))["pinned"] is True
    write_skill(tmp_path, "helper", "version: 2.0.0\nroles: [review]\nrisk: high\n", body="v2\n")
    refused = cli("skills", "update", "helper")
    assert refused.code == 1 and "helper is pinned at sha256:" in refused.err
    assert cli("skills", "unpin", "helper").code == 0
    updated = _json(cli("skills", "update", "helper", "--json"))
    assert updated["changed"] is True and updated["policy"]["approved"] is False  # type: ignore[index]
    rolled = _json(cli("skills", "rollback", "helper", "--json"))
    assert rolled["version"] == "1.0.0"

    shown = _json(cli("skills", "show", "helper", "--json"))
    assert [v["state"] for v in shown["versions"]] == ["active", "previous"]  # type: ignore[attr-defined]
    doctor = cli("skills", "doctor", "--json")
    assert doctor.code == 0 and _json(doctor)["ok"] is True
    assert _json(cli("skills", "disable", "helper", "--json"))["enabled"] is False
    assert _json(cli("skills", "remove", "helper", "--json"))["removed"] is True
    assert [r["name"] for r in _json(cli("skills", "list", "--json"))["skills"]] == ["ivoai-memory-context"]  # type: ignore[attr-defined]


def test_quarantines_exit_1_with_the_report_and_refusals_are_one_line(
    cli: CliRunner, xdg: XdgPaths, tmp_path: Path
) -> None:
    write_skill(tmp_path / "src", "bad", "risk: banana\n")
    partial = cli("skills", "add", str(tmp_path / "src"), "--json")
    assert partial.code == 1
    assert _json(partial)["quarantined"][0]["reason"].startswith("field `risk`")  # type: ignore[index]
    (tmp_path / "linked").mkdir()
    write_skill(tmp_path / "linked", "x")
    (tmp_path / "linked" / "x" / "pw").symlink_to("/etc/passwd")
    refused = cli("skills", "add", str(tmp_path / "linked"))
    assert refused.code == 1
    assert refused.err == "ivoai: error: x/pw is a symlink (links are never followed or stored)\n"


def test_usage_errors_and_unknown_names_are_reported_plainly(
    cli: CliRunner, xdg: XdgPaths, tmp_path: Path
) -> None:
    missing = cli("skills", "show", "nope")
    assert missing.code == 1 and "no skill named 'nope' (known: ivoai-memory-context)" in missing.err
    unpinned = cli("skills", "add", "https://example.invalid/x.git", "--kind", "git")
    assert unpinned.code == 2 and "--commit FULL_ID" in unpinned.err
    builtin = cli("skills", "remove", "ivoai-memory-context")
    assert builtin.code == 1 and "disable ivoai-memory-context" in builtin.err
    role = cli("skills", "select", "--role", "wizard", "--tier", "LIGHT", "--executor", "codex")
    assert role.code == 1 and "unknown worker role 'wizard'" in role.err


def test_list_and_doctor_on_a_fresh_home_create_nothing(cli: CliRunner, xdg: XdgPaths) -> None:
    assert cli("skills", "list").code == 0
    assert cli("skills", "doctor").code == 0
    assert not xdg.state.exists()
