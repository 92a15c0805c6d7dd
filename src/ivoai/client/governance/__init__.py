"""Context governance: stable prefix, deterministic compaction, large-output previews, metrics."""
