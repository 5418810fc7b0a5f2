"""The metrics endpoint's settings: TLS files in pairs, basic auth, both off unless asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from conf import ConfigError, load_config


def test_tls_certificate_without_its_key_names_the_missing_field(tmp_path: Path) -> None:
    f = tmp_path / "cert_without_key.yaml"
    f.write_text("metrics: {tls_cert_file: /etc/flinkwatch-tls/tls.crt}\n")
    with pytest.raises(ConfigError, match=r"cert_without_key\.yaml.*metrics\.tls_key_file"):
        load_config(f)


def test_tls_key_without_its_certificate_names_the_missing_field(tmp_path: Path) -> None:
    f = tmp_path / "key_without_cert.yaml"
    f.write_text("metrics: {tls_key_file: /etc/flinkwatch-tls/tls.key}\n")
    with pytest.raises(ConfigError, match=r"key_without_cert\.yaml.*metrics\.tls_cert_file"):
        load_config(f)


def test_client_ca_without_a_server_certificate_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "client_ca_without_tls.yaml"
    f.write_text("metrics: {tls_client_ca_file: /etc/flinkwatch-tls/ca.crt}\n")
    with pytest.raises(
        ConfigError, match=r"metrics\.tls_client_ca_file needs metrics\.tls_cert_file"
    ):
        load_config(f)


def test_basic_auth_username_cannot_hold_a_colon(tmp_path: Path) -> None:
    # The user-id of basic auth ends at the first colon (RFC 7617).
    f = tmp_path / "username_with_colon.yaml"
    f.write_text("metrics: {basic_auth_username: 'prom:etheus'}\n")
    with pytest.raises(ConfigError, match=r"metrics\.basic_auth_username: String should match"):
        load_config(f)


def test_tls_and_basic_auth_settings_load(tmp_path: Path) -> None:
    f = tmp_path / "tls_and_auth.yaml"
    f.write_text(
        "metrics:\n"
        "  tls_cert_file: /etc/flinkwatch-tls/tls.crt\n"
        "  tls_key_file: /etc/flinkwatch-tls/tls.key\n"
        "  basic_auth_username: prometheus\n"
        "  basic_auth_password_env: PROM_PASSWORD\n"
    )
    m = load_config(f).metrics
    assert m.tls and m.tls_key_file == Path("/etc/flinkwatch-tls/tls.key")
    assert (m.basic_auth_username, m.basic_auth_password_env) == ("prometheus", "PROM_PASSWORD")
    # Off unless asked for: the defaults serve plain HTTP without credentials.
    default = load_config(None).metrics
    assert not default.tls and default.basic_auth_username is None
