"""Fidelity classes, compression providers (caveman, headroom, direct), selection, telemetry."""
