"""Provider-neutral contracts: capability support, health, provenance, fallback, component matrix."""
