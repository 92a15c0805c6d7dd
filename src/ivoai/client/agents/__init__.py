"""Executors for the official codex, claude and opencode CLIs; probes; MCP rendering; launch."""
