"""Certificates for the TLS tests, made with the openssl command docs/metrics-endpoint.md gives."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

#: The names docs/metrics-endpoint.md puts in the certificate: the compose service, the
#: Kubernetes Service (the ServiceMonitor's serverName), and the local ones.
SANS = "DNS:flinkwatch,DNS:flinkwatch.flinkwatch.svc,DNS:localhost,IP:127.0.0.1"


def self_signed(
    directory: Path, name: str = "tls", cn: str = "flinkwatch", sans: str = SANS
) -> tuple[Path, Path]:
    """A self-signed EC certificate and its unencrypted key: ``<name>.crt``, ``<name>.key``.

    Self-signed, it is also the CA file its clients verify it with (Prometheus'
    ``tls_config.ca_file``), as in the documented set-up.
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("openssl is not on PATH")
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-sha256", "-days", "365", "-nodes", "-keyout", str(key), "-out", str(cert),
            "-subj", f"/CN={cn}", "-addext", f"subjectAltName={sans}",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    return cert, key
