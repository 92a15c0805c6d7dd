"""The skill control plane: registry, metadata-only index, resolver, policy, staging and attachment.

See docs/skills.md. Everything here is additive: a session works with an empty or missing registry,
and nothing in a skill can change policy or gain orchestrator authority.
"""
