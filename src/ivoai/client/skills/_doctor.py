"""`ivoai skills doctor`: read-only checks of the skill control plane (modes, digests, resolution)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ivoai.client.skills.builtin import all_builtins
from ivoai.client.skills.model import Lifecycle, SkillError
from ivoai.client.skills.resolver import Catalog, Request, resolve
from ivoai.common.fsio import describe_mode

if TYPE_CHECKING:
    from ivoai.client.skills.service import SkillService


def doctor_report(service: SkillService) -> dict[str, Any]:
    """Read-only checks: directory modes, registry, every stored tree against its digest, resolution."""
    problems: list[str] = []
    warnings: list[str] = []
    paths = [
        describe_mode(p) for p in (service.store.root, service.store.registry_path, service.store.objects)
    ]
    try:
        registry = service.store.load()
    except (SkillError, OSError) as exc:
        problems.append(str(getattr(exc, "message", exc)))
        return {
            "schema": 1,
            "ok": False,
            "paths": paths,
            "problems": problems,
            "warnings": warnings,
            "skills": [],
        }
    skills: list[dict[str, Any]] = []
    for name in sorted(registry.skills):
        record = registry.skills[name]
        for version in record.versions:
            if version.digest is None or version.state is Lifecycle.QUARANTINED:
                continue
            found = service.verify_object(version.digest)
            if found != version.digest:
                problems.append(
                    f"{name}: the stored {version.state.value} tree does not match its digest ({found})"
                )
            else:
                bad_mode = _loose_modes(service.store.object_dir(version.digest))
                if bad_mode:
                    problems.append(f"{name}: {bad_mode}")
        last = record.versions[-1] if record.versions else None
        if last is not None and last.state is Lifecycle.QUARANTINED:
            warnings.append(f"{name}: last attempt quarantined: {last.reason}")
    try:
        builtins = all_builtins()
        catalog = service.catalog(registry)
    except (SkillError, OSError) as exc:
        problems.append(f"built-in skills: {getattr(exc, 'message', exc)}")
        builtins, catalog = [], Catalog({})
    for name in sorted(catalog.skills):
        result = resolve(catalog, Request(requested=(name,)))
        for excluded in result.excluded:
            warnings.append(f"{name}: {excluded.name} left out: {excluded.reason}")
        skills.append({"name": name, "usable": any(c.name == name for c in result.selected)})
    referenced = {d[7:] for d in registry.digests()}
    if service.store.objects.is_dir():
        orphans = sorted(set(os.listdir(service.store.objects)) - referenced)
        if orphans:
            warnings.append(
                f"{len(orphans)} stored object(s) no skill refers to (removed by the next change)"
            )
    if service.store.staging.is_dir() and os.listdir(service.store.staging):
        warnings.append("leftover staging directories (removed by the next change)")
    for refusal in registry.quarantine[-5:]:
        source = refusal.get("source", {})
        warnings.append(
            f"refused source {source.get('kind')} {source.get('location')}: {refusal.get('reason')}"
        )
    return {
        "schema": 1,
        "ok": not problems,
        "paths": paths,
        "builtins": [b.meta.name for b in builtins],
        "skills": skills,
        "problems": problems,
        "warnings": warnings,
    }


def _loose_modes(path: Path) -> str | None:
    """A stored object must stay private: 0700 directories, 0600 files, no links."""
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        for name in [*dirnames, *filenames]:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            mode = st.st_mode & 0o777
            if os.path.islink(full):
                return f"{full} is a symlink"
            want = 0o700 if name in dirnames else 0o600
            if mode != want:
                return f"{full} has mode {mode:04o}, expected {want:04o}"
    return None
