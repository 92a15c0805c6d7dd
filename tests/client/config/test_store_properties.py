"""Property: whatever unknown content a user's config.toml holds, `config set` keeps it byte for byte."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import tomlkit
from hypothesis import given, settings
from hypothesis import strategies as st

from ivoai.client.config.fast import read_config_fast
from ivoai.client.config.store import set_key
from ivoai.common.paths import XdgPaths

_names = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True).filter(
    lambda n: n not in {"schema", "compression"}
)
_scalars = st.one_of(
    st.integers(min_value=-(2**62), max_value=2**62),
    st.booleans(),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=30),
    st.lists(st.integers(min_value=0, max_value=1000), max_size=4),
)
_tables = st.dictionaries(
    _names, st.dictionaries(_names, _scalars, min_size=1, max_size=4), min_size=1, max_size=4
)


@settings(max_examples=15, deadline=None)
@given(
    tables=_tables,
    comment=st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=40),
)
def test_set_key_preserves_arbitrary_unknown_tables_and_comments(
    tables: dict[str, dict[str, object]], comment: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        paths = XdgPaths(
            base / "c" / "ivoai", base / "d" / "ivoai", base / "s" / "ivoai", base / "k" / "ivoai"
        )
        paths.config.mkdir(parents=True, mode=0o700)
        user_text = f"schema = 1\n# {comment}\n" + tomlkit.dumps(tables)
        paths.config_file.write_text(user_text, encoding="utf-8")
        os.chmod(paths.config_file, 0o600)
        set_key("compression.provider", "direct", paths)
        after = paths.config_file.read_text(encoding="utf-8")
        assert after.startswith(user_text)
        data = read_config_fast(paths)
        assert data["compression"] == {"provider": "direct", "source": "explicit"}
        for name, table in tables.items():
            assert data[name] == table
