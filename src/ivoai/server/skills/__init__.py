"""Skill registry and MCP skill delivery."""
