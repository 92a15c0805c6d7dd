"""config.toml (style-preserving round trip), secrets store, ownership manifest, migrations."""
