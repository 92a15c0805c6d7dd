"""Deployment: systemd units, the filesystem layout and the Compose file (`ivoai server setup`)."""
