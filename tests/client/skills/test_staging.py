"""Non-executing staging from a local directory: hostile sources are refused whole, nothing partial stays."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ivoai.client.skills.model import StagingRefused
from ivoai.client.skills.resolver import Request
from ivoai.client.skills.service import SkillService, make_source
from ivoai.client.skills.tree import tree_facts
from ivoai.common.limits import SKILL_FILE_MAX_BYTES, SKILL_TREE_MAX_FILES
from ivoai.common.paths import XdgPaths
from tests.client.skills.helpers import files_digest, write_skill


def _objects(xdg: XdgPaths) -> list[str]:
    path = xdg.state / "skills" / "objects"
    return sorted(os.listdir(path)) if path.exists() else []


def _assert_nothing_active(service: SkillService, xdg: XdgPaths) -> None:
    assert [c.name for c in service.candidates()] == ["ivoai-memory-context"]
    assert _objects(xdg) == []
    staging = xdg.state / "skills" / "staging"
    assert not staging.exists() or os.listdir(staging) == []


def test_a_local_skill_is_stored_private_immutable_and_active(xdg: XdgPaths, tmp_path: Path) -> None:
    src = write_skill(tmp_path, "hello", "version: 1.0.0\nroles: [research]\n")
    (src / "reference").mkdir()
    (src / "reference" / "notes.md").write_text("notes")
    (src / ".git").mkdir()
    (src / ".git" / "config").write_text("[core]\n")
    report = SkillService().add(make_source(str(src)))
    assert report["ok"] and [a["name"] for a in report["added"]] == ["hello"]
    added = report["added"][0]
    assert (added["state"], added["files"], added["policy"]["decision"]) == ("active", 2, "ALLOW")
    stored = xdg.state / "skills" / "objects" / added["digest"][7:]
    assert files_digest(stored) == {k: v for k, v in files_digest(src).items() if not k.startswith(".git")}
    assert tree_facts(str(stored)).digest == added["digest"]
    for dirpath, dirnames, filenames in os.walk(xdg.state / "skills"):
        for name in dirnames:
            assert stat.S_IMODE(os.lstat(os.path.join(dirpath, name)).st_mode) == 0o700
        for name in filenames:
            assert stat.S_IMODE(os.lstat(os.path.join(dirpath, name)).st_mode) == 0o600
    registry = (xdg.state / "skills" / "registry.json").read_text()
    assert '"schema": 1' in registry and "# Body" not in registry  # metadata only, never the body


def test_a_missing_registry_is_a_healthy_empty_one_and_reading_creates_nothing(xdg: XdgPaths) -> None:
    service = SkillService()
    assert [r["name"] for r in service.list_skills()] == ["ivoai-memory-context"]
    assert service.doctor()["ok"] is True
    assert not xdg.state.exists()


@pytest.mark.parametrize(
    ("plant", "reason"),
    [
        (lambda d: (d / "passwd").symlink_to("/etc/passwd"), "passwd is a symlink"),
        (
            lambda d: os.link(d / "SKILL.md", d.parent.parent / "elsewhere.md"),
            "victim/SKILL.md is a hard link (2 links)",
        ),
        (lambda d: os.mkfifo(d / "pipe"), "pipe is a special file (FIFO)"),
        (lambda d: os.chmod(_touch(d / "run.sh"), 0o755), "run.sh is executable (mode 0755)"),
        (
            lambda d: os.truncate(_touch(d / "huge.bin"), 100 * 1024 * 1024),
            f"huge.bin is 104857600 bytes; the limit is {SKILL_FILE_MAX_BYTES} bytes per file",
        ),
    ],
    ids=["symlink-to-etc-passwd", "hardlink", "fifo", "executable", "100MiB-sparse"],
)
def test_hostile_local_sources_are_refused_whole_with_the_reason(
    xdg: XdgPaths, tmp_path: Path, plant: object, reason: str
) -> None:
    src = write_skill(tmp_path / "src", "victim")
    write_skill(tmp_path / "src", "innocent")
    plant(src)  # type: ignore[operator]
    service = SkillService()
    with pytest.raises(StagingRefused) as info:
        service.add(make_source(str(tmp_path / "src")))
    assert reason in info.value.message
    _assert_nothing_active(service, xdg)
    assert service.store.load().quarantine[-1]["reason"] == info.value.message


def _touch(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def test_ten_thousand_files_are_refused_with_the_limit_named(xdg: XdgPaths, tmp_path: Path) -> None:
    src = write_skill(tmp_path, "many")
    for i in range(10_000):
        os.close(os.open(src / f"f{i:05d}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    service = SkillService()
    with pytest.raises(StagingRefused, match=f"more than {SKILL_TREE_MAX_FILES} files"):
        service.add(make_source(str(src)))
    _assert_nothing_active(service, xdg)


def test_a_symlinked_source_root_is_refused(xdg: XdgPaths, tmp_path: Path) -> None:
    real = write_skill(tmp_path, "real")
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(StagingRefused, match="symlink or not a directory"):
        SkillService().add(make_source(str(tmp_path / "link")))


def test_bad_skills_are_quarantined_by_name_while_the_good_ones_are_added(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    root = tmp_path / "src"
    write_skill(root, "good")
    write_skill(root, "traversal", "dependencies: [../../etc]\n")
    write_skill(root, "ring-a", "dependencies: [ring-b]\n")
    write_skill(root, "ring-b", "dependencies: [ring-a]\n")
    write_skill(root, "needs", "dependencies: [absent]\n")
    write_skill(root, "ivoai-orchestrator")
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_text("---\nname: broken\ndescription: &anchor x\n---\n")
    service = SkillService()
    report = service.add(make_source(str(root)))
    assert report["ok"] is False
    assert [a["name"] for a in report["added"]] == ["good"]
    reasons = {q["path"]: q["reason"] for q in report["quarantined"]}
    assert reasons == {
        "broken": "line 3: unsupported YAML syntax '&anchor x' "
        "(anchors, aliases, tags and flow mappings are refused)",
        "traversal": "field `dependencies`: '../../etc' is not a skill name "
        "(lowercase letters, digits, hyphens)",
        "ivoai-orchestrator": "the name prefix `ivoai-` is reserved for ivoai's own skills",
        "needs": "requires `absent`, which is neither in this source nor installed",
        "ring-a": "dependency cycle ring-a -> ring-b -> ring-a",
        "ring-b": "dependency cycle ring-a -> ring-b -> ring-a",
    }
    rows = {r["name"]: r for r in service.list_skills()}
    assert rows["ring-a"]["state"] == "quarantined" and rows["ring-a"]["reason"].startswith(
        "dependency cycle"
    )
    assert rows["good"]["state"] == "active"
    assert sorted(c.name for c in service.candidates()) == ["good", "ivoai-memory-context"]


def test_a_skill_declaring_shell_or_orchestrator_authority_is_stored_but_denied_and_never_selected(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    root = tmp_path / "src"
    write_skill(root, "sheller", "capabilities: [shell]\nroles: [research]\n")
    write_skill(root, "boss", "roles: [orchestrator]\n")
    write_skill(root, "hooked", "hooks:\n  Stop:\n    - command: curl evil\n")
    service = SkillService()
    report = service.add(make_source(str(root)))
    decisions = {a["name"]: a["policy"] for a in report["added"]}
    assert {n: p["decision"] for n, p in decisions.items()} == {
        "boss": "DENY",
        "hooked": "DENY",
        "sheller": "DENY",
    }
    assert "claims `shell`: shell is never allowed" in decisions["sheller"]["reasons"]
    result = service.resolve(Request(requested=("sheller", "boss", "hooked")))
    assert result.selected == ()
    assert {e.name: e.code for e in result.excluded} == {
        "boss": "denied",
        "hooked": "denied",
        "sheller": "denied",
    }


def test_adding_a_name_that_is_already_installed_is_refused_with_the_way_out(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    write_skill(tmp_path / "a", "same")
    write_skill(tmp_path / "b", "same")
    service = SkillService()
    service.add(make_source(str(tmp_path / "a")))
    report = service.add(make_source(str(tmp_path / "b")))
    assert report["added"] == []
    assert "use `ivoai skills update same` or remove it first" in report["quarantined"][0]["reason"]


def test_rollback_after_a_bad_update_restores_the_exact_previous_tree(xdg: XdgPaths, tmp_path: Path) -> None:
    src = write_skill(tmp_path, "evolving", "version: 1.0.0\n", body="v1 body\n")
    (src / "data.txt").write_text("v1 data")
    v1_files = files_digest(src)
    service = SkillService()
    v1 = service.add(make_source(str(src)))["added"][0]["digest"]

    write_skill(tmp_path, "evolving", "version: 2.0.0\ncapabilities: [shell]\n", body="v2 body\n")
    (src / "data.txt").write_text("v2 data")
    update = service.update("evolving")
    assert update["changed"] and update["previous"] == v1
    assert update["policy"]["decision"] == "DENY"  # the bad version: it claims a shell

    (src / "evil").symlink_to("/etc/passwd")  # a worse update is refused and changes nothing
    with pytest.raises(StagingRefused, match="evil is a symlink"):
        service.update("evolving")
    states = [(v["state"], v["digest"]) for v in service.show("evolving")["versions"]]
    assert states == [("active", update["digest"]), ("previous", v1), ("quarantined", None)]

    rolled = service.rollback("evolving")
    assert rolled["digest"] == v1 and rolled["version"] == "1.0.0"
    active = next(c for c in service.candidates() if c.name == "evolving")
    assert active.digest == v1 and tree_facts(active.directory).digest == v1
    assert files_digest(Path(active.directory)) == v1_files
    assert service.rollback("evolving")["version"] == "2.0.0"  # and forward again


def test_rollback_refuses_a_stored_tree_that_changed_on_disk(xdg: XdgPaths, tmp_path: Path) -> None:
    src = write_skill(tmp_path, "tamper", body="v1\n")
    service = SkillService()
    v1 = service.add(make_source(str(src)))["added"][0]["digest"]
    write_skill(tmp_path, "tamper", body="v2\n")
    service.update("tamper")
    (service.store.object_dir(v1) / "SKILL.md").write_text("---\nname: tamper\ndescription: x\n---\nevil\n")
    with pytest.raises(Exception, match="does not match its digest"):
        service.rollback("tamper")
    doctor = service.doctor()
    assert doctor["ok"] is False and any("does not match its digest" in p for p in doctor["problems"])


def test_pinned_skills_refuse_updates_until_unpinned(xdg: XdgPaths, tmp_path: Path) -> None:
    src = write_skill(tmp_path, "stable", body="v1\n")
    service = SkillService()
    service.add(make_source(str(src)))
    service.pin("stable")
    write_skill(tmp_path, "stable", body="v2\n")
    with pytest.raises(Exception, match="stable is pinned at sha256:"):
        service.update("stable")
    service.pin("stable", False)
    assert service.update("stable")["changed"] is True


def test_staged_only_skills_are_not_active_until_enabled(xdg: XdgPaths, tmp_path: Path) -> None:
    src = write_skill(tmp_path, "later", "risk: high\n")
    service = SkillService()
    report = service.add(make_source(str(src)), stage_only=True)
    assert report["added"][0]["state"] == "staged"
    assert "later" not in [c.name for c in service.candidates()]
    enabled = service.enable("later")
    assert enabled["policy"]["decision"] == "REQUIRE_APPROVAL" and enabled["policy"]["approved"] is False
    assert service.resolve(Request(requested=("later",))).excluded[0].code == "needs_approval"
    service.enable("later", approve=True)
    assert [c.name for c in service.resolve(Request(requested=("later",))).selected] == ["later"]
    service.disable("later")
    assert service.resolve(Request(requested=("later",))).excluded[0].code == "not_installed"


def test_remove_forgets_the_skill_and_deletes_its_objects(xdg: XdgPaths, tmp_path: Path) -> None:
    src = write_skill(tmp_path, "gone")
    service = SkillService()
    service.add(make_source(str(src)))
    assert len(_objects(xdg)) == 1
    service.remove("gone")
    assert _objects(xdg) == [] and "gone" not in [r["name"] for r in service.list_skills()]
