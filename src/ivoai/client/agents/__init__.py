"""Executors for the official codex, claude and opencode CLIs; probes; MCP rendering; launch.

Nothing is imported here: `ivoai codex` reaches `launch_cli` through this package and must stay
import-light (see docs/launcher.md, "Start-up cost").
"""
