"""A self-signed certificate for 127.0.0.1, made with the real `openssl` (installed by scripts/test)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """Write `cert.pem` and `key.pem` (CN and SAN 127.0.0.1, one day) into `directory`."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("openssl is needed to create the test certificate (scripts/test installs it)")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key
