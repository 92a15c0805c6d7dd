"""The shared integer check: JSON/TOML booleans are never numbers; bounds are inclusive."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ivoai.common.validate import is_int


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None, [1], 2**70 + 0.5])
def test_booleans_floats_strings_and_containers_are_not_integers(value: object) -> None:
    assert not is_int(value)


@pytest.mark.parametrize("value", [0, -5, 1, 2**70])
def test_any_int_is_an_integer_without_bounds(value: int) -> None:
    assert is_int(value)


def test_bounds_are_inclusive_and_each_optional() -> None:
    assert [is_int(v, 1, 3) for v in (0, 1, 3, 4)] == [False, True, True, False]
    assert (is_int(-1, 0), is_int(0, 0), is_int(10**9, 0)) == (False, True, True)
    assert (is_int(7, None, 7), is_int(8, None, 7), is_int(-(10**9), None, 7)) == (True, False, True)


def test_a_bool_is_refused_even_inside_the_bounds() -> None:
    assert not is_int(True, 0, 1)
    assert not is_int(False, 0, 1)


def test_importing_it_loads_nothing_but_the_package_itself() -> None:
    # `config/fast.py` on the import-light launch path uses it: not even `typing` may come along.
    code = (
        "import sys; before = set(sys.modules); import ivoai.common.validate; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert set(out.stdout.split()) <= {"__future__", "ivoai", "ivoai.common", "ivoai.common.validate"}
