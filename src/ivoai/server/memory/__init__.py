"""Memory service: page store, tools, hook intake."""
