"""Backup and restore of a server data directory (`ivoai server backup|restore`); see `archive.py`."""
