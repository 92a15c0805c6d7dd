"""Shared foundations imported by every layer; imports nothing of `client` or `server`."""
