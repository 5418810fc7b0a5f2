"""The Prometheus endpoint on the driver and the optional Pushgateway: ``metrics``."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from conf.base import FrozenModel


class PushgatewayConfig(FrozenModel):
    """Optional push of the same metrics to a Prometheus Pushgateway."""

    url: str | None = Field(default=None, description="e.g. http://pushgateway:9091; null = off")
    job: str = Field(
        default="flinkwatch",
        description="The Pushgateway's job grouping label (the cluster is added).",
    )
    interval_s: float = Field(default=15.0, gt=0, description="Seconds between pushes.")


class MetricsConfig(FrozenModel):
    """The Prometheus endpoint on the driver (docs/metrics-endpoint.md).

    HTTPS needs both ``tls_cert_file`` and ``tls_key_file``; ``tls_client_ca_file`` adds
    mutual TLS. Basic auth is on when ``basic_auth_username`` is set; its password is read
    from the environment variable ``basic_auth_password_env``, never from this file.
    """

    enabled: bool = Field(
        default=True, description="Serve Prometheus metrics from the driver (run and demo)."
    )
    host: str = Field(
        default="127.0.0.1",
        description=(
            "Bind address of /metrics; 0.0.0.0 to be scraped from other hosts (see "
            "docs/metrics-endpoint.md)."
        ),
    )
    port: int = Field(default=9250, ge=0, le=65535, description="Port of /metrics.")
    max_connections: int = Field(
        default=64,
        ge=1,
        le=10_000,
        description=(
            "connections /metrics keeps open at most; one more closes the oldest that has not "
            "sent its whole request (a slow or stalled client), so scrapes still get in"
        ),
    )
    request_deadline_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description=(
            "seconds a connection to /metrics may take in all (TLS handshake, request, "
            "response); a client still sending or reading after it is closed"
        ),
    )
    health_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description=(
            "Port of a second listener on metrics.host that answers GET /healthz only, in "
            "plain HTTP without credentials, for a kubelet liveness probe (which has no client "
            "certificate or password); null = none. /healthz is also on metrics.port, behind "
            "its TLS and basic auth"
        ),
    )
    health_max_age_s: float = Field(
        default=600.0,
        gt=0,
        description=(
            "/healthz answers 503 once the detect query has shown no progress (a micro-batch "
            "finished, or a look for new data found none) for this long, and 200 before; "
            "keep it above the longest micro-batch, or a liveness probe restarts a driver "
            "that is only slow (and the batch starts over)"
        ),
    )
    pushgateway: PushgatewayConfig = PushgatewayConfig()
    max_signal_entities: int = Field(
        default=5000,
        gt=0,
        description=(
            "entities per detector with signal series; more are refused (counted), "
            "so a flood of ids cannot flood Prometheus"
        ),
    )
    tls_cert_file: Path | None = Field(
        default=None, description="PEM certificate (chain) served over HTTPS; with tls_key_file"
    )
    tls_key_file: Path | None = Field(
        default=None, description="PEM private key of tls_cert_file (unencrypted)"
    )
    tls_client_ca_file: Path | None = Field(
        default=None,
        description="PEM CA bundle; set = clients must present a certificate it signed (mTLS)",
    )
    basic_auth_username: str | None = Field(
        default=None,
        min_length=1,
        # RFC 7617: the user-id ends at the first colon, so it cannot hold one.
        pattern=r"^[^:]+$",
        description="set = every request needs HTTP basic auth as this user",
    )
    basic_auth_password_env: str = Field(
        default="FLINKWATCH_METRICS_PASSWORD",
        min_length=1,
        description="environment variable holding the basic-auth password",
    )

    @model_validator(mode="after")
    def _tls_files_come_in_pairs(self) -> MetricsConfig:
        # One file without the other cannot serve HTTPS; quietly serving plain HTTP
        # instead would expose what the operator meant to protect.
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            have, missing = (
                ("tls_cert_file", "tls_key_file")
                if self.tls_cert_file is not None
                else ("tls_key_file", "tls_cert_file")
            )
            msg = f"metrics.{missing} is required when metrics.{have} is set"
            raise ValueError(msg)
        if self.tls_client_ca_file is not None and self.tls_cert_file is None:
            msg = (
                "metrics.tls_client_ca_file needs metrics.tls_cert_file and "
                "metrics.tls_key_file (client certificates are checked in the TLS handshake)"
            )
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _health_port_is_its_own(self) -> MetricsConfig:
        if self.health_port is not None and self.health_port == self.port != 0:
            msg = "metrics.health_port must differ from metrics.port (or be null)"
            raise ValueError(msg)
        return self

    @property
    def tls(self) -> bool:
        """Whether the endpoint serves HTTPS."""
        return self.tls_cert_file is not None
