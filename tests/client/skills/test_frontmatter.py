"""SKILL.md front matter: the strict YAML subset, its refusals, and fuzzed input (Hypothesis)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ivoai.client.skills import frontmatter as fm
from ivoai.client.skills.frontmatter import FrontMatterError, parse_front_matter, read_front_matter
from ivoai.client.skills.model import SkillMeta
from ivoai.common.limits import SKILL_FRONTMATTER_MAX_BYTES, SKILL_FRONTMATTER_READ_BLOCK_BYTES


def test_codex_style_block_description_and_metadata_mapping_are_read() -> None:
    meta = parse_front_matter(
        "name: pdf-tools\n"
        "description: |-\n  Extracts text\n  from PDFs.\n"
        "version: 1.2.0\n"
        "metadata:\n  short-description: PDFs\n  risk: moderate\n  roles: research, review\n"
    )
    assert meta.name == "pdf-tools"
    assert meta.description == "Extracts text from PDFs."
    assert (meta.version, meta.risk, meta.roles) == ("1.2.0", "MODERATE", ("research", "review"))
    assert meta.other_keys == ("metadata.short-description",)


def test_lists_come_from_flow_block_or_comma_separated_values() -> None:
    meta = parse_front_matter(
        "name: a\ndescription: d\n"
        "dependencies: [b, 'c']\n"
        "conflicts:\n  - x\n  - y\n"
        "allowed-tools: Read, Grep Bash(git log:*)\n"
        "executors: [Codex, claude]\n"
    )
    assert meta.dependencies == ("b", "c")
    assert meta.conflicts == ("x", "y")
    assert meta.allowed_tools == ("Read", "Grep", "Bash(git log:*)")
    assert meta.executors == ("codex", "claude")


def test_unknown_keys_are_recorded_by_name_and_their_blocks_are_not_interpreted() -> None:
    meta = parse_front_matter(
        "name: a\ndescription: d\nhooks:\n  PreToolUse:\n    - matcher: Bash\n"
        "      hooks: [{type: command}]\nlicense: MIT\n"
    )
    assert meta.other_keys == ("hooks", "license")
    assert "PreToolUse" not in repr(meta)


def test_values_stay_strings_without_implicit_typing() -> None:
    meta = parse_front_matter("name: a\ndescription: no\nversion: 1.10\n")
    assert (meta.description, meta.version) == ("no", "1.10")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("description: d\n", "missing field `name`"),
        ("name: a\n", "missing field `description`"),
        ("name: &x a\ndescription: d\n", "line 2: unsupported YAML syntax"),
        ("name: a\ndescription: *x\n", "line 3: unsupported YAML syntax"),
        ("name: !!python/object a\ndescription: d\n", "line 2: unsupported YAML syntax"),
        ("name: a\ndescription: {k: v}\n", "line 3: unsupported YAML syntax"),
        ("name: a\nname: b\ndescription: d\n", "line 3: key `name` is declared twice"),
        ("name: a\ndescription: d\nallowed_tools: x\nallowed-tools: y\n", "declared twice"),
        ("name: a\ndescription: d\nmetadata:\n  risk: low\nrisk: high\n", "`risk` is declared twice"),
        ('"name": a\ndescription: d\n', "line 2: expected `key: value`"),
        ("name: a\n\tdescription: d\n", "line 3: tab in indentation"),
        ("name: a\ndescription: a\u2028hooks: x\n", "U+2028"),
        ("name: a\ndescription: 'open\n", "multi-line quotes are not supported"),
        ("name: ../etc\ndescription: d\n", "field `name`: '../etc' is not a skill name"),
        (
            "name: a\ndescription: d\ndependencies: [../../x]\n",
            "field `dependencies`: '../../x' is not a skill name",
        ),
        ("name: a\ndescription: d\ndependencies: [a]\n", "cannot name itself"),
        ("name: a\ndescription: d\nrisk: banana\n", "field `risk`: 'banana' is not one of low"),
        ("name: a\ndescription: d\nexecutors: [emacs]\n", "unknown executor 'emacs'"),
        ("name: a\ndescription: d\nroles:\n  - research\n  - nested: x\n", "line 6"),
        ("name: a\ndescription: x: y\n", "line 3: `: ` inside a plain value"),
        ("name: a\ndescription: d\ncapabilities: [Rm -rf]\n", "is not a capability name"),
        ("name: a\ndescription: " + "x" * 1025 + "\n", "field `description` exceeds 1024 characters"),
    ],
)
def test_refusals_name_the_line_or_the_field(text: str, message: str) -> None:
    with pytest.raises(FrontMatterError, match=None) as info:
        parse_front_matter(text)
    assert message in info.value.message


def _dir_with(tmp: Path, content: bytes) -> int:
    (tmp / "SKILL.md").write_bytes(content)
    return os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"name: a\n", "does not start with a `---`"),
        (b"\xef\xbb\xbf---\nname: a\n---\n", "does not start with a `---`"),
        (b"---\nname: a\ndescription: d\n", "no closing `---`"),
        (b"---\nname: a\n ---\nhooks: x\n---\n", "ambiguous front matter delimiter"),
        (b"---\nname: \xff\n---\n", "not UTF-8"),
        (b"---\n" + b"k: v\n" * (SKILL_FRONTMATTER_MAX_BYTES // 5 + 1) + b"---\n", "exceeds 16384 bytes"),
    ],
)
def test_delimiters_encoding_and_size_are_checked_before_parsing(
    tmp_path: Path, content: bytes, message: str
) -> None:
    fd = _dir_with(tmp_path, content)
    try:
        with pytest.raises(FrontMatterError) as info:
            read_front_matter(fd)
    finally:
        os.close(fd)
    assert message in info.value.message


def test_a_symlinked_skill_file_is_refused_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("---\nname: a\ndescription: d\n---\n")
    (tmp_path / "SKILL.md").symlink_to(tmp_path / "real.md")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(FrontMatterError, match="symlink"):
            read_front_matter(fd)
    finally:
        os.close(fd)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "SKILL.md")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(FrontMatterError, match="not a regular file"):
            read_front_matter(fd)
    finally:
        os.close(fd)


# --- properties ----------------------------------------------------------------------------------

_yamlish = st.sampled_from(
    [
        "name",
        "description",
        "version",
        "risk",
        "roles",
        "dependencies",
        "conflicts",
        "capabilities",
        "allowed-tools",
        "metadata",
        "hooks",
        "exclusive-role",
        "executors",
        "x_y",
        "-",
        "- a",
        "? k",
        "#c",
    ]
)
_fragments = st.one_of(
    st.text(
        st.sampled_from(list("ab-_ :#'\"[]{},&*!|>%@`?\t\r\\") + ["\u2028", "\x00", "é", "\n"]), max_size=12
    ),
    st.sampled_from(
        ["low", "HIGH", "[a, b]", "|", ">-", "'q''s'", '"\\u0041"', "[", "a: b", "&x", "*x", "1.0"]
    ),
)


_VALID_LINES = [
    "name: fuzz-skill",
    "description: A skill that exists to be fuzzed",
    "version: 0.1.0",
    "roles: [research, review]",
    "capabilities:\n  - read\n  - mcp",
    "metadata:\n  risk: low\n  exclusive-role: formatter",
    "description2: |\n  block text\n  more",
    "allowed-tools: Read Grep",
]


@st.composite
def _front_matters(draw: st.DrawFn) -> str:
    """A valid front matter with random lines inserted or replaced (some stay valid, most do not)."""
    lines = list(_VALID_LINES)
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 4]))):
        indent = " " * draw(st.sampled_from([0, 0, 0, 2, 4, 1]))
        key = draw(_yamlish)
        sep = draw(st.sampled_from([": ", ":", ": ", " ", ":  "]))
        line = indent + key + sep + draw(_fragments)
        at = draw(st.integers(0, len(lines)))
        if draw(st.booleans()) and at < len(lines):
            lines[at] = line
        else:
            lines.insert(at, line)
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\r\n"]))


@settings(max_examples=400, deadline=None)
@given(text=_front_matters())
def test_fuzzed_front_matter_never_raises_anything_but_a_front_matter_error(text: str) -> None:
    try:
        meta = parse_front_matter(text)
    except FrontMatterError as exc:
        assert exc.message and "\n" not in exc.message
    else:
        assert isinstance(meta, SkillMeta) and meta.name and meta.description


_simple_values = st.one_of(
    st.from_regex(r"[a-z0-9]{1,6}(-[a-z0-9]{1,6}){0,2}", fullmatch=True),
    st.from_regex(r"\[([a-z]{1,5}(, ?[a-z]{1,5}){0,3})?\]", fullmatch=True),
    st.sampled_from(["low", "Moderate", "1.2.3", "Read, Grep", "codex", "a b", "x#y", "u:v", "é", "a, , b"]),
)
_simple_keys = st.sampled_from(
    [
        "name",
        "description",
        "version",
        "risk",
        "roles",
        "phases",
        "dependencies",
        "optional-dependencies",
        "conflicts",
        "capabilities",
        "allowed-tools",
        "executors",
        "exclusive-role",
        "license",
        "model",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    pairs=st.lists(st.tuples(_simple_keys, _simple_values), max_size=8),
    name=_simple_values,
    order=st.randoms(use_true_random=False),
)
def test_the_fast_path_agrees_with_the_general_parser(
    pairs: list[tuple[str, str]], name: str, order: object
) -> None:
    lines = [f"{k}: {v}\n" for k, v in [("name", name), ("description", "Does a thing"), *pairs]]
    order.shuffle(lines)  # type: ignore[attr-defined]
    text = "".join(lines)
    fast = fm._fast_meta(text)
    try:
        general: SkillMeta | None = fm.parse_general(text)
    except FrontMatterError:
        general = None
    if fast is not None:
        assert fast == general


@st.composite
def _skill_files(draw: st.DrawFn) -> tuple[bytes, bytes]:
    head = draw(_front_matters()).encode("utf-8", "surrogatepass")
    opening = draw(st.sampled_from([b"---\n", b"---\r\n", b"", b"--- \n"]))
    closing = draw(st.sampled_from([b"---\n", b"---", b"", b" ---\n", b"---\r\n"]))
    return opening + head + closing, b"BODY" * draw(st.integers(0, 3000)) + b"SENTINEL-BODY-TEXT"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=_skill_files())
def test_the_indexer_never_raises_and_never_reads_past_the_front_matter_block(
    files: tuple[bytes, bytes],
) -> None:
    head, body = files
    with tempfile.TemporaryDirectory() as tmp:
        skill = Path(tmp) / "s"
        skill.mkdir()
        (skill / "SKILL.md").write_bytes(head + body)
        read_sizes: list[int] = []
        real_read = os.read

        def counting_read(fd: int, n: int) -> bytes:
            data = real_read(fd, n)
            read_sizes.append(len(data))
            return data

        from ivoai.client.skills.index import index_directory

        with mock.patch.object(os, "read", counting_read):
            result = index_directory(tmp)
        assert len(result.entries) + len(result.quarantined) == 1
        limit = len(head) if result.entries else SKILL_FRONTMATTER_MAX_BYTES
        assert sum(read_sizes) <= limit + SKILL_FRONTMATTER_READ_BLOCK_BYTES
        assert "SENTINEL" not in repr(result)
