"""Hook processes here run with cached bytecode, as an installed ivoai does.

This checkout may run with PYTHONDONTWRITEBYTECODE=1, which makes every hook process compile ivoai's
modules from source (~20 ms of CPU each); 64 of them at once on a shared 2-core machine would then
measure the compiler, not the hook. The cache lives in a temporary directory, never in the source tree.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def _pycache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pycache")


@pytest.fixture(autouse=True)
def _bytecode_cache(_pycache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(_pycache))
    yield
