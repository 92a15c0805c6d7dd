"""The skills ivoai ships (package data under `ivoai/skills/`), addressed by `skill://` URIs and digests.

A skill is delivered three ways from the same bytes: MCP `resources/read` of
`skill://<name>/SKILL.md`, the `skills/list` / `skills/get` extension methods, and the release
ZIP (`export_zip`) for Claude custom Skill import. The digest (`sha256:<hex>` of SKILL.md) lets a
client import a fixed snapshot and detect a change.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import secrets
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ivoai.common.errors import NotFoundError, UnsafePathError
from ivoai.common.ids import sha256_hex

SKILL_NAMES = ("ivoai-memory-context",)
SKILL_MIME = "text/markdown"
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed timestamps: the same skill always zips to the same bytes


@dataclass(frozen=True)
class Skill:
    """One skill: its name, frontmatter description, SKILL.md text and digest."""

    name: str
    description: str
    text: str

    @property
    def digest(self) -> str:
        return "sha256:" + sha256_hex(self.text)

    @property
    def uri(self) -> str:
        return f"skill://{self.name}/SKILL.md"


_DESCRIPTION = re.compile(r"^description:\s*(.+)$", re.MULTILINE)


def load_skill(name: str) -> Skill:
    """A packaged skill by name.

    Raises:
        NotFoundError: no such skill.
    """
    if name not in SKILL_NAMES:
        raise NotFoundError(f"no skill named {name!r} (known: {', '.join(SKILL_NAMES)})")
    text = resources.files("ivoai").joinpath("skills", name, "SKILL.md").read_text(encoding="utf-8")
    match = _DESCRIPTION.search(text.split("---", 2)[1] if text.startswith("---") else "")
    return Skill(name=name, description=match.group(1).strip() if match else name, text=text)


def all_skills() -> list[Skill]:
    """Every packaged skill."""
    return [load_skill(n) for n in SKILL_NAMES]


def zip_bytes(skill: Skill) -> bytes:
    """The release archive: `<name>/SKILL.md`, deterministic."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        info = zipfile.ZipInfo(f"{skill.name}/SKILL.md", date_time=ZIP_EPOCH)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, skill.text.encode("utf-8"))
    return buf.getvalue()


def export_zip(directory: Path, name: str = SKILL_NAMES[0]) -> Path:
    """Write `<directory>/<name>.zip` atomically (staging file + rename; never through a symlink).

    The directory is created if missing; an existing user directory keeps its own mode.
    """
    skill = load_skill(name)
    directory = directory.absolute()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{name}.zip"
    tmp = directory / f".{target.name}.tmp-{secrets.token_hex(6)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(zip_bytes(skill))
            fh.flush()
            os.fsync(fh.fileno())
        if target.is_symlink():
            raise UnsafePathError(f"{target} is a symlink; remove it")
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target
