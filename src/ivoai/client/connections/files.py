"""File names of the connection registry (no imports: read on the launcher's fast path)."""

REGISTRY_FILE = "connections.json"
REGISTRY_LOCK = "connections.lock"
