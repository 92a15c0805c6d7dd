"""AUTO orchestration (not built yet)."""
