"""Fixtures for the ArtifactStore tests: a store in the test's private XDG cache and a settable clock."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ivoai.client.workingcontext import ArtifactStore, StoreLimits
from ivoai.common.paths import XdgPaths

T0 = 1_800_000_000.0


@dataclass
class Clock:
    """A clock the test moves explicitly (TTL checks without sleeping)."""

    now: float = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(xdg: XdgPaths, clock: Clock) -> ArtifactStore:
    return ArtifactStore(xdg.working_context_dir, clock=clock)


@pytest.fixture
def small_store(xdg: XdgPaths, clock: Clock) -> ArtifactStore:
    """Same store, with small quotas so limit tests write kilobytes, not hundreds of MiB."""
    limits = StoreLimits(
        artifact_max_bytes=1000,
        session_max_bytes=3000,
        session_max_objects=4,
        global_max_bytes=5000,
        global_max_objects=6,
        range_max_bytes=100,
    )
    return ArtifactStore(xdg.working_context_dir, limits=limits, clock=clock)
