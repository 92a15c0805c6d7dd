"""Provider-neutral contracts: capability support, health, provenance, fallback, component matrix.

Runtime-only: nothing here is part of a persisted config, state or server schema.
"""

from ivoai.core.health import Health, HealthState
from ivoai.core.matrix import ComponentMatrix, ComponentStatus
from ivoai.core.provenance import Fallback, Provenance, Source
from ivoai.core.support import Fact, Support

__all__ = [
    "ComponentMatrix",
    "ComponentStatus",
    "Fact",
    "Fallback",
    "Health",
    "HealthState",
    "Provenance",
    "Source",
    "Support",
]
