"""Discovery, health/ready, enrollment API, MCP mounts, Web MCP facade, admin allowlist."""
