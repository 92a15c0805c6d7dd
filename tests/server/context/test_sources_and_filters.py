"""Safe discovery and reading (no embedder needed): every hostile tree entry is skipped with a reason."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ivoai.common.limits import DOCUMENT_MAX_BYTES
from ivoai.server.context.chunker import chunk_text, merge_texts
from ivoai.server.context.errors import InvalidConnectorError
from ivoai.server.context.filters import (
    content_skip_reason,
    decode_text,
    lexical_only_reason,
    path_skip_reason,
)
from ivoai.server.context.sources import Candidate, Skipped, open_root, read_candidate, walk_filesystem

from .conftest import write_tree


def _discover(root: Path) -> tuple[dict[str, Candidate], dict[str, str]]:
    fd = open_root(str(root))
    try:
        found = list(walk_filesystem(fd))
    finally:
        os.close(fd)
    cands = {d.path: d for d in found if isinstance(d, Candidate)}
    skipped = {d.path: d.reason for d in found if isinstance(d, Skipped)}
    return cands, skipped


def test_symlink_loops_and_links_out_of_root_are_skipped_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_tree(outside, {"secret.txt": "outside the root"})
    root = write_tree(tmp_path / "root", {"ok.md": "fine"})
    os.symlink(outside, root / "escape_dir")
    os.symlink(outside / "secret.txt", root / "escape_file")
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.mkdir(root / "sub")
    os.symlink("..", root / "sub" / "up")
    cands, skipped = _discover(root)
    assert set(cands) == {"ok.md"}
    for name in ("escape_dir", "escape_file", "loop_a", "loop_b", "sub/up"):
        assert skipped[name] == "symlink (never followed)"


def test_a_file_swapped_for_a_symlink_after_discovery_is_not_read(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "root", {"a.txt": "real", "dir/b.txt": "real"})
    (tmp_path / "target.txt").write_text("outside")
    fd = open_root(str(root))
    try:
        os.unlink(root / "a.txt")
        os.symlink(tmp_path / "target.txt", root / "a.txt")
        os.rename(root / "dir", root / "dir2")
        os.symlink(root / "dir2", root / "dir")
        assert read_candidate(fd, "a.txt") == Skipped("a.txt", "symlink (never followed)")
        assert read_candidate(fd, "dir/b.txt") == Skipped("dir/b.txt", "symlink (never followed)")
    finally:
        os.close(fd)


def test_fifo_is_skipped_and_reading_it_never_blocks(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "root", {"ok.md": "fine"})
    os.mkfifo(root / "pipe")
    cands, skipped = _discover(root)
    assert "pipe" not in cands and skipped["pipe"] == "FIFO (not a regular file)"
    fd = open_root(str(root))
    try:
        result = read_candidate(fd, "pipe")  # O_NONBLOCK: returns at once instead of waiting for a writer
    finally:
        os.close(fd)
    assert isinstance(result, Skipped) and "not a regular file" in result.reason or "FIFO" in str(result)


def test_device_node_is_skipped(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "root", {"ok.md": "fine"})
    try:
        os.mknod(root / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod of a character device is not permitted here (needs CAP_MKNOD)")
    cands, skipped = _discover(root)
    assert "null" not in cands and skipped["null"] == "device node (not a regular file)"
    fd = open_root(str(root))
    try:
        assert read_candidate(fd, "null") == Skipped("null", "device node (not a regular file)")
    finally:
        os.close(fd)


def test_socket_is_skipped(tmp_path: Path) -> None:
    import socket

    root = write_tree(tmp_path / "root", {"ok.md": "fine"})
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(root / "s.sock"))
        _, skipped = _discover(root)
    finally:
        sock.close()
    assert skipped["s.sock"] == "socket (not a regular file)"


def test_file_over_8_mib_is_skipped_with_the_limit_named(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "root", {"big.txt": "x" * (9 * 1024 * 1024), "edge.txt": "y" * DOCUMENT_MAX_BYTES}
    )
    cands, skipped = _discover(root)
    assert "edge.txt" in cands
    assert skipped["big.txt"].startswith(f"larger than {DOCUMENT_MAX_BYTES} bytes")


def test_names_with_newlines_or_invalid_utf8_are_skipped_and_reported_escaped(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "root", {"ok.md": "fine"})
    with open(os.path.join(bytes(root), b"bad\xff.txt"), "wb") as f:
        f.write(b"text")
    (root / "two\nlines.txt").write_text("text")
    cands, skipped = _discover(root)
    assert set(cands) == {"ok.md"}
    reasons = sorted(skipped.values())
    assert reasons == [
        "file name contains a control character (newline, tab, ...)",
        "file name is not valid UTF-8",
    ]
    assert all("\n" not in p for p in skipped)


def test_vcs_internals_and_dependency_caches_are_never_walked(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "root",
        {
            ".git/config": "[core]",
            ".hg/x": "y",
            "node_modules/a/index.js": "x",
            "src/__pycache__/m.pyc": "x",
            "src/m.py": "print(1)",
        },
    )
    cands, _ = _discover(root)
    assert set(cands) == {"src/m.py"}


def test_connector_root_that_is_a_symlink_or_missing_is_refused(tmp_path: Path) -> None:
    real = write_tree(tmp_path / "real", {"a": "b"})
    os.symlink(real, tmp_path / "link")
    with pytest.raises(InvalidConnectorError, match="symlink"):
        open_root(str(tmp_path / "link"))
    with pytest.raises(InvalidConnectorError, match="does not exist"):
        open_root(str(tmp_path / "nope"))


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        "config/.env.production",
        "id_rsa",
        "id_ed25519.pub",
        "certs/server.pem",
        "tls.key",
        "credentials.json",
        "home/.aws/credentials",
        "infra/prod.tfstate",
        "kubeconfig",
        "x/.kube/config",
        ".netrc",
        ".git-credentials",
        "keystore.p12",
    ],
)
def test_secret_credential_and_key_files_are_skipped_by_name(path: str) -> None:
    assert path_skip_reason(path) is not None


@pytest.mark.parametrize("path", ["README.md", ".env.example", "src/keys.py", "docs/credentials-guide.md"])
def test_ordinary_files_pass_the_name_rules(path: str) -> None:
    assert path_skip_reason(path) is None


def test_private_keys_credentials_and_tokened_configs_are_skipped_by_content() -> None:
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
    assert content_skip_reason("notes.txt", "see below\n" + key) == "contains a private key"
    aws = content_skip_reason("cfg.py", 'AWS = "AKIAABCDEFGHIJKLMNOP"')
    assert aws is not None and aws.startswith("contains a credential")
    assert content_skip_reason(".npmrc", "//registry.npmjs.org/:_authToken=abc123\n") is not None
    assert content_skip_reason(".npmrc", "registry=https://registry.npmjs.org/\n") is None
    assert content_skip_reason("main.py", "def main():\n    return 0\n") is None


def test_binary_and_non_utf8_content_is_refused_and_text_is_normalized() -> None:
    assert decode_text(b"\x7fELF\x02\x01\x00\x00") is None
    assert decode_text("caf\xe9".encode("latin-1")) is None
    assert decode_text(b"\xef\xbb\xbfa\r\nb\rc") == "a\nb\nc"
    assert decode_text("e\u0301".encode()) == "\u00e9"


def test_chunks_respect_the_size_limit_overlap_and_prefer_line_boundaries() -> None:
    text = "".join(f"line {i:04d} " + "word " * 12 + "\n" for i in range(200))
    chunks = chunk_text("d_1", text)
    assert len(chunks) > 5
    assert all(len(c.text) <= 1200 for c in chunks)
    assert all(c.text.endswith("\n") for c in chunks[:-1])
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.start < a.end  # overlap
        assert 40 <= a.end - b.start <= 200
        assert text[b.start - 1] == "\n"  # next chunk starts at a line start
    assert merge_texts([(c.start, c.end, c.text) for c in chunks])[2] == text


def test_chunking_is_deterministic_and_ids_depend_on_document_index_and_text() -> None:
    text = "alpha beta gamma " * 300
    a, b = chunk_text("d_1", text), chunk_text("d_1", text)
    assert [c.chunk_id for c in a] == [c.chunk_id for c in b]
    assert chunk_text("d_2", text)[0].chunk_id != a[0].chunk_id
    changed = chunk_text("d_1", text[:-5] + "omega")
    assert changed[0].chunk_id == a[0].chunk_id and changed[-1].chunk_id != a[-1].chunk_id


def test_a_text_without_whitespace_is_cut_hard_at_the_limit() -> None:
    chunks = chunk_text("d", "x" * 3000)
    assert [len(c.text) for c in chunks][0] == 1200
    assert "".join(merge_texts([(c.start, c.end, c.text) for c in chunks])[2]) == "x" * 3000


@pytest.mark.parametrize(
    ("path", "text", "reason"),
    [
        ("tools/package-lock.json", '{"name": "x"}\n', "lockfile"),
        ("Cargo.lock", "[[package]]\n", "lockfile"),
        ("web/app.min.js", "var a=1;\n", "minified or source map"),
        ("web/app.js.map", '{"version":3}\n', "minified or source map"),
        ("api/user_pb2.py", "class User: pass\n", "generated (by name)"),
        ("third_party/lib/x.c", "int x;\n", "vendored or build output (third_party/)"),
        ("pkg/dist/index.js", "export {}\n", "vendored or build output (dist/)"),
        (
            "api/client.go",
            "// Code generated by protoc. DO NOT EDIT.\npackage api\n",
            "generated (marked in its header)",
        ),
        ("data/blob.txt", "x" * 5000 + "\n", "very long lines (minified or data)"),
        ("data/b64.txt", ("QUJD" * 700 + "\n") * 3, "very long lines (minified or data)"),
        (
            "data/dense.csv",
            ("a,b,c,d,e,f,g,h,i,j,k,l,m" * 6 + "\n") * 30,
            "almost no whitespace (minified, encoded or data)",
        ),
    ],
)
def test_machine_made_files_are_indexed_lexically_only_with_their_reason(
    path: str, text: str, reason: str | None
) -> None:
    assert lexical_only_reason(path, text) == reason


def test_hand_written_text_is_embedded_even_with_long_lines_or_generated_words_further_down() -> None:
    prose = ("This paragraph is written by a person and runs long. " * 30 + "\n\n") * 3
    assert lexical_only_reason("README.md", prose) is None  # long lines, but under half of the text
    later = "# Notes\n\n" + "line\n" * 10 + "Remember: do not edit the generated files by hand.\n"
    assert lexical_only_reason("docs/notes.md", later) is None  # the marker is not in the header
    assert lexical_only_reason("src/vendoring.py", "def vendor(): ...\n") is None
    packed = "a" * 3000  # no whitespace at all, one short line: data
    assert lexical_only_reason("x.txt", packed + "\n" + "b" * 2000) == "very long lines (minified or data)"


def test_source_that_labels_identifiers_like_secrets_is_indexed() -> None:
    text = 'class ConnectorNotFound(ContextError):\n    code = "connector_not_found"\n'
    assert content_skip_reason("src/ivoai/server/context/errors.py", text) is None
