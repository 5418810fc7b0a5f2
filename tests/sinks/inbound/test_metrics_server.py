"""The /metrics endpoint: basic auth, HTTPS, mutual TLS, certificate renewal, stalled clients.

Every test serves a fresh registry on 127.0.0.1 and talks to it over real sockets.
"""

from __future__ import annotations

import base64
import concurrent.futures
import http.client
import json
import logging
import os
import shutil
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from conf import MetricsConfig
from sinks.inbound.metrics_server import (
    BasicAuth,
    MetricsEndpoint,
    MetricsEndpointError,
    MetricsServer,
    TlsFiles,
)
from tests.certs import self_signed

USER, PASSWORD = "prometheus", "s3cret-ünïcode"


@pytest.fixture
def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Gauge("flinkwatch_config_info", "The config in force.", ["hash"], registry=reg).labels(
        "abc123"
    ).set(1)
    return reg


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tls.crt/tls.key (the server) and client.crt/client.key (a client for mTLS)."""
    d = tmp_path_factory.mktemp("certs")
    self_signed(d, "tls")
    self_signed(d, "client", cn="prometheus", sans="DNS:prometheus")
    return d


@dataclass
class Reply:
    status: int
    headers: Message
    body: bytes


def get(
    url: str,
    auth: tuple[str, str] | None = None,
    context: ssl.SSLContext | None = None,
    header: str | None = None,
) -> Reply:
    """GET ``url``; a 4xx/5xx is a Reply too."""
    req = urllib.request.Request(url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    if header is not None:
        req.add_header("Authorization", header)
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            return Reply(resp.status, resp.headers, resp.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.headers, e.read())


def client_context(certs: Path, with_client_cert: bool = False) -> ssl.SSLContext:
    """Verifies the server against its own (self-signed) certificate, as Prometheus' ca_file."""
    ctx = ssl.create_default_context(cafile=certs / "tls.crt")
    if with_client_cert:
        ctx.load_cert_chain(certs / "client.crt", certs / "client.key")
    return ctx


def serve(endpoint: MetricsEndpoint, registry: CollectorRegistry) -> Iterator[MetricsServer]:
    with endpoint.serve(registry) as server:
        yield server


@pytest.fixture
def with_auth(registry: CollectorRegistry) -> Iterator[MetricsServer]:
    yield from serve(MetricsEndpoint("127.0.0.1", 0, auth=BasicAuth(USER, PASSWORD)), registry)


@pytest.fixture
def with_tls(registry: CollectorRegistry, certs: Path) -> Iterator[MetricsServer]:
    tls = TlsFiles(certs / "tls.crt", certs / "tls.key")
    yield from serve(MetricsEndpoint("127.0.0.1", 0, tls=tls), registry)


# --- basic auth -------------------------------------------------------------------------


def test_without_credentials_the_endpoint_answers_401_with_a_basic_challenge(
    with_auth: MetricsServer,
) -> None:
    reply = get(with_auth.url)
    assert reply.status == 401
    assert reply.headers["WWW-Authenticate"] == 'Basic realm="flinkwatch", charset="UTF-8"'
    assert b"flinkwatch_config_info" not in reply.body


def test_the_right_credentials_get_exactly_the_registry(
    with_auth: MetricsServer, registry: CollectorRegistry
) -> None:
    reply = get(with_auth.url, auth=(USER, PASSWORD))
    assert reply.status == 200
    assert reply.body == generate_latest(registry)


@pytest.mark.parametrize(
    "header",
    [
        "Basic " + base64.b64encode(f"{USER}:wrong".encode()).decode(),
        "Basic " + base64.b64encode(f"someone:{PASSWORD}".encode()).decode(),
        "Basic " + base64.b64encode(f"{USER}:{PASSWORD}x".encode()).decode(),
        "Basic " + base64.b64encode(f"{USER}{PASSWORD}".encode()).decode(),  # no colon
        "Basic not-base64!",
        f"Bearer {PASSWORD}",
    ],
    ids=["wrong_password", "wrong_user", "longer_password", "no_colon", "bad_base64", "bearer"],
)
def test_wrong_or_malformed_credentials_get_401(with_auth: MetricsServer, header: str) -> None:
    reply = get(with_auth.url, header=header)
    assert reply.status == 401
    assert b"flinkwatch_config_info" not in reply.body


def test_every_path_needs_the_credentials(with_auth: MetricsServer) -> None:
    # prometheus-client answers the registry on any path; none may be a way around auth.
    base = with_auth.url.removesuffix("/metrics")
    assert get(f"{base}/").status == 401
    assert get(f"{base}/anything?name[]=flinkwatch_config_info").status == 401


# --- TLS --------------------------------------------------------------------------------


def test_tls_serves_the_metrics_to_a_client_that_verifies_the_certificate(
    with_tls: MetricsServer, registry: CollectorRegistry, certs: Path
) -> None:
    assert with_tls.url.startswith("https://127.0.0.1:")
    reply = get(with_tls.url, context=client_context(certs))
    assert reply.status == 200
    assert reply.body == generate_latest(registry)


def test_tls_never_answers_plain_http(with_tls: MetricsServer) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        get(with_tls.url.replace("https://", "http://"))


def test_a_client_that_never_starts_its_handshake_does_not_stop_other_scrapes(
    with_tls: MetricsServer, certs: Path
) -> None:
    # prometheus-client's own server does the handshake in its accept loop: there, this
    # silent connection would leave the scrape below waiting forever.
    with socket.create_connection(("127.0.0.1", with_tls.port)):
        started = time.monotonic()
        reply = get(with_tls.url, context=client_context(certs))
        assert reply.status == 200
        assert time.monotonic() - started < 5


def test_tls_and_basic_auth_together(
    registry: CollectorRegistry, certs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = MetricsConfig(
        port=0,
        tls_cert_file=certs / "tls.crt",
        tls_key_file=certs / "tls.key",
        basic_auth_username=USER,
        basic_auth_password_env="PROM_PASSWORD",
    )
    with caplog.at_level(logging.WARNING):
        endpoint = MetricsEndpoint.from_config(cfg, env={"PROM_PASSWORD": f"{PASSWORD}\n"})
    assert not caplog.records  # TLS is on: nothing to warn about
    assert endpoint.describe() == "tls=on auth=basic"
    with endpoint.serve(registry) as server:
        ctx = client_context(certs)
        assert get(server.url, context=ctx).status == 401
        assert get(server.url, auth=(USER, "wrong"), context=ctx).status == 401
        # The trailing newline of a password file is not part of the password.
        assert get(server.url, auth=(USER, PASSWORD), context=ctx).status == 200


def test_mutual_tls_serves_only_clients_with_a_certificate_the_ca_signed(
    registry: CollectorRegistry, certs: Path
) -> None:
    tls = TlsFiles(certs / "tls.crt", certs / "tls.key", client_ca_file=certs / "client.crt")
    with MetricsEndpoint("127.0.0.1", 0, tls=tls).serve(registry) as server:
        assert get(server.url, context=client_context(certs, with_client_cert=True)).status == 200
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            get(server.url, context=client_context(certs))


def test_a_renewed_certificate_is_served_without_a_restart(
    registry: CollectorRegistry, tmp_path: Path
) -> None:
    live = tmp_path / "live"
    self_signed(live)
    with MetricsEndpoint("127.0.0.1", 0, tls=TlsFiles(live / "tls.crt", live / "tls.key")).serve(
        registry
    ) as server:
        first = ssl.get_server_certificate(("127.0.0.1", server.port))
        # Renewal the way Kubernetes updates a mounted Secret: new files moved into place.
        self_signed(tmp_path / "renewed")
        for name in ("tls.crt", "tls.key"):
            os.replace(tmp_path / "renewed" / name, live / name)
        renewed = ssl.get_server_certificate(("127.0.0.1", server.port))
        assert renewed != first
        assert renewed == ssl.DER_cert_to_PEM_cert(
            ssl.PEM_cert_to_DER_cert((live / "tls.crt").read_text())
        )
        assert get(server.url, context=client_context(live)).status == 200


def test_a_half_renewed_pair_keeps_the_previous_certificate(
    registry: CollectorRegistry, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    live = tmp_path / "live"
    self_signed(live)
    kept = (live / "tls.crt").read_text()
    with MetricsEndpoint("127.0.0.1", 0, tls=TlsFiles(live / "tls.crt", live / "tls.key")).serve(
        registry
    ) as server:
        self_signed(tmp_path / "renewed")
        shutil.copy(tmp_path / "renewed" / "tls.crt", live / "tls.crt")  # the key not yet
        with caplog.at_level(logging.WARNING):
            served = ssl.get_server_certificate(("127.0.0.1", server.port))
        assert ssl.PEM_cert_to_DER_cert(served) == ssl.PEM_cert_to_DER_cert(kept)
        assert "keeping the previous certificate" in caplog.text


# --- from the config --------------------------------------------------------------------


def test_basic_auth_without_its_password_variable_is_an_error_naming_it() -> None:
    cfg = MetricsConfig(basic_auth_username=USER, basic_auth_password_env="PROM_PASSWORD")
    with pytest.raises(MetricsEndpointError, match=r"\$PROM_PASSWORD is empty or unset"):
        MetricsEndpoint.from_config(cfg, env={})
    with pytest.raises(MetricsEndpointError, match=r"\$PROM_PASSWORD"):
        MetricsEndpoint.from_config(cfg, env={"PROM_PASSWORD": "  \n"})


def test_basic_auth_without_tls_works_but_warns(
    registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = MetricsConfig(port=0, basic_auth_username=USER)
    with caplog.at_level(logging.WARNING, logger="sinks.inbound.metrics_server"):
        endpoint = MetricsEndpoint.from_config(cfg, env={"FLINKWATCH_METRICS_PASSWORD": PASSWORD})
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert "clear text" in record.getMessage()
    with endpoint.serve(registry) as server:
        assert server.url.startswith("http://")
        assert get(server.url, auth=(USER, PASSWORD)).status == 200


def test_a_key_that_does_not_load_is_an_error_naming_the_setting(
    certs: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "not-a-key.pem"
    bad.write_text("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n")
    cfg = MetricsConfig(tls_cert_file=certs / "tls.crt", tls_key_file=bad)
    with pytest.raises(MetricsEndpointError, match=r"metrics\.tls_key_file .*not-a-key\.pem"):
        MetricsEndpoint.from_config(cfg, env={})
    missing = MetricsConfig(tls_cert_file=tmp_path / "gone.crt", tls_key_file=bad)
    with pytest.raises(MetricsEndpointError, match=r"metrics\.tls_cert_file .*gone\.crt"):
        MetricsEndpoint.from_config(missing, env={})


def test_the_default_config_serves_plain_http_without_credentials(
    registry: CollectorRegistry,
) -> None:
    endpoint = MetricsEndpoint.from_config(MetricsConfig(port=0), env={})
    assert endpoint.describe() == "tls=off auth=none"
    with endpoint.serve(registry) as server:
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        reply = get(server.url)
        assert reply.status == 200
        assert reply.body == generate_latest(registry)


# --- slow clients: a cap on connections, a deadline on each -------------------------------

#: A request cut short: what a slow-drip client has sent before its next byte.
PARTIAL = b"GET /metrics HTTP/1.1\r\nHost: flinkwatch\r\nUser-Agent: drip"


def fd_budget() -> int:
    """File descriptors this process may still open (``ulimit -n`` less those it holds)."""
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft - len(os.listdir("/proc/self/fd"))


def closed_by_server(sock: socket.socket, within_s: float, drip: bytes = b"") -> float | None:
    """Seconds until the server closes ``sock``, sending ``drip`` every 50 ms meanwhile."""
    import select

    started = time.monotonic()
    while time.monotonic() - started < within_s:
        readable, _, _ = select.select([sock], [], [], 0.05)
        if readable:
            try:
                if sock.recv(4096) == b"":
                    return time.monotonic() - started
            except ConnectionError:
                return time.monotonic() - started
        elif drip:
            try:
                sock.sendall(drip)
            except ConnectionError:
                return time.monotonic() - started
    return None


def test_thousands_of_slow_clients_neither_stop_scrapes_nor_add_threads(
    registry: CollectorRegistry,
) -> None:
    # Issue #22 item 5: a thread per connection and only a per-read timeout, so each client
    # that sends a byte every 20 s held a thread of the driver for as long as it liked.
    # 2,000 clients sized to the descriptors left: each is one here, one at most there.
    cap = 64
    clients = min(2000, fd_budget() - cap - 100)
    assert clients >= 4 * cap, f"ulimit -n too low for this test: {fd_budget()} left"
    with MetricsEndpoint("127.0.0.1", 0).serve(registry) as server:
        threads = threading.active_count()
        slow = []
        try:
            for n in range(1, clients + 1):
                s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                s.sendall(PARTIAL)
                slow.append(s)
                if n % 250 == 0:
                    # One I/O thread (counted above) and two that render, whatever the
                    # clients; a scrape answered meanwhile, its body the registry's.
                    reply = get(server.url)
                    assert reply.status == 200
                    assert reply.body == generate_latest(registry)
                    assert threading.active_count() <= threads + 2, f"after {n} clients"
            # The server kept at most `cap` of them open: it closed the oldest to let
            # each newcomer in (and the scrapes, which sent their request at once).
            assert server.stats.evicted >= clients - cap
        finally:
            for s in slow:
                s.close()


def test_a_client_dripping_its_request_is_closed_at_the_total_deadline(
    registry: CollectorRegistry,
) -> None:
    # A byte every 50 ms never trips a per-read timeout; the deadline counts from accept.
    with MetricsEndpoint("127.0.0.1", 0, deadline_s=0.5).serve(registry) as server:
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(PARTIAL)
            took = closed_by_server(s, within_s=10, drip=b"x")
        assert took is not None and took >= 0.45
        assert server.stats.expired == 1
        assert get(server.url).status == 200  # the endpoint itself is fine


def test_a_tls_client_that_never_says_hello_is_closed_at_the_deadline(
    registry: CollectorRegistry, certs: Path
) -> None:
    tls = TlsFiles(certs / "tls.crt", certs / "tls.key")
    with MetricsEndpoint("127.0.0.1", 0, tls=tls, deadline_s=0.5).serve(registry) as server:
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            took = closed_by_server(s, within_s=10)
        assert took is not None and took >= 0.45
        assert get(server.url, context=client_context(certs)).status == 200


def test_connections_being_answered_are_never_closed_to_make_room(
    registry: CollectorRegistry,
) -> None:
    # Only a connection still waiting for its request is closed for a newcomer; when every
    # open one is being answered, the newcomer is turned away instead.
    release = threading.Event()
    rendering = threading.Semaphore(0)

    class Slow:
        def collect(self):  # type: ignore[no-untyped-def]
            rendering.release()
            release.wait(10)
            return []

    registry.register(Slow())  # type: ignore[arg-type]
    with MetricsEndpoint("127.0.0.1", 0, max_connections=2).serve(registry) as server:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            scrapes = [pool.submit(get, server.url) for _ in range(2)]
            for _ in range(2):
                assert rendering.acquire(timeout=10)  # both are being answered
            with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
                get(server.url)
            release.set()
            assert [f.result(timeout=10).status for f in scrapes] == [200, 200]
        assert server.stats.refused == 1 and server.stats.evicted == 0


# --- /healthz: the detect query's progress, for a liveness probe ---------------------------


class Progress:
    """A fake progress source: the age /healthz is asked about, set by the test."""

    def __init__(self, age_s: float = 0.0) -> None:
        self.age_s = age_s

    def __call__(self) -> float:
        return self.age_s


def test_healthz_answers_200_while_progress_is_recent_and_503_once_it_is_too_old(
    registry: CollectorRegistry,
) -> None:
    progress = Progress(age_s=3)
    endpoint = MetricsEndpoint("127.0.0.1", 0, health_port=0, health_max_age_s=60)
    with endpoint.serve(registry, progress_age_s=progress) as server:
        assert server.health_url is not None
        base = server.url.removesuffix("/metrics")
        for url in (server.health_url, f"{base}/healthz"):
            reply = get(url)
            assert (reply.status, reply.body) == (200, b"ok: last progress 3 s ago (limit 60 s)\n")
            assert reply.headers["Cache-Control"] == "no-store"
        progress.age_s = 60
        assert get(server.health_url).status == 200  # the limit itself is still fine
        progress.age_s = 61.4
        for url in (server.health_url, f"{base}/healthz"):
            reply = get(url)
            assert reply.status == 503
            assert reply.body == b"stalled: last progress 61 s ago (limit 60 s)\n"
        # Recovered progress answers 200 again; /metrics never changes with it.
        progress.age_s = 0
        assert get(server.health_url).status == 200
        assert get(server.url).body == generate_latest(registry)


def test_the_health_port_answers_healthz_alone_in_plain_http_without_credentials(
    registry: CollectorRegistry, certs: Path
) -> None:
    # HTTPS with client certificates and basic auth on the metrics port: a kubelet, which
    # has neither, gets its answer from the health port, and nothing else there.
    tls = TlsFiles(certs / "tls.crt", certs / "tls.key", client_ca_file=certs / "client.crt")
    endpoint = MetricsEndpoint(
        "127.0.0.1", 0, tls=tls, auth=BasicAuth(USER, PASSWORD), health_port=0
    )
    with endpoint.serve(registry, progress_age_s=Progress(5)) as server:
        assert server.health_url is not None
        assert server.health_url.startswith("http://127.0.0.1:")
        assert server.health_url.endswith("/healthz")
        assert get(server.health_url).status == 200
        health_base = server.health_url.removesuffix("/healthz")
        for path in ("/metrics", "/", "/healthz/../metrics"):
            reply = get(f"{health_base}{path}")
            assert reply.status == 404
            assert b"flinkwatch_config_info" not in reply.body
        # On the metrics port /healthz is behind the same protection as /metrics.
        ctx = client_context(certs, with_client_cert=True)
        base = server.url.removesuffix("/metrics")
        assert get(f"{base}/healthz", context=ctx).status == 401
        assert get(f"{base}/healthz", auth=(USER, PASSWORD), context=ctx).status == 200


def test_without_a_progress_source_there_is_no_health_port(registry: CollectorRegistry) -> None:
    with MetricsEndpoint("127.0.0.1", 0, health_port=0).serve(registry) as server:
        assert server.health_url is None


def test_the_health_port_comes_from_the_config_and_is_not_the_metrics_port() -> None:
    endpoint = MetricsEndpoint.from_config(
        MetricsConfig(health_port=9251, health_max_age_s=120), env={}
    )
    assert (endpoint.health_port, endpoint.health_max_age_s) == (9251, 120)
    with pytest.raises(ValueError, match="metrics.health_port must differ from metrics.port"):
        MetricsConfig(port=9250, health_port=9250)


# --- /explain -----------------------------------------------------------------------------


class Explainer:
    """Answers as it is told; remembers the query strings it was asked."""

    def __init__(self, status: int, body: object) -> None:
        self.status, self.body = status, body
        self.asked: list[str] = []

    def __call__(self, query: str) -> tuple[int, object]:
        self.asked.append(query)
        return self.status, self.body


def test_explain_is_behind_the_same_tls_and_basic_auth_as_the_metrics(
    registry: CollectorRegistry, certs: Path
) -> None:
    explainer = Explainer(200, {"entities": [], "note": "ünïcode"})
    tls = TlsFiles(certs / "tls.crt", certs / "tls.key")
    endpoint = MetricsEndpoint("127.0.0.1", 0, tls=tls, auth=BasicAuth(USER, PASSWORD))
    with endpoint.serve(registry, explainer=explainer) as server:
        url = server.url.removesuffix("/metrics") + "/explain?job=orders%20x"
        ctx = client_context(certs)
        for auth in (None, (USER, "wrong")):
            reply = get(url, auth=auth, context=ctx)
            assert reply.status == 401
            assert b"entities" not in reply.body
        assert explainer.asked == []  # refused before the state is read
        reply = get(url, auth=(USER, PASSWORD), context=ctx)
        assert reply.status == 200
        assert reply.headers["Content-Type"] == "application/json"
        assert reply.headers["Cache-Control"] == "no-store"
        assert json.loads(reply.body) == {"entities": [], "note": "ünïcode"}
        assert explainer.asked == ["job=orders%20x"]
        # /metrics is unchanged beside it.
        assert get(server.url, auth=(USER, PASSWORD), context=ctx).body == generate_latest(registry)


@pytest.mark.parametrize("status", [400, 503])
def test_explain_passes_the_explainers_refusal_on(registry: CollectorRegistry, status: int) -> None:
    explainer = Explainer(status, {"error": "ask about one entity"})
    with MetricsEndpoint("127.0.0.1", 0).serve(registry, explainer=explainer) as server:
        reply = get(server.url.removesuffix("/metrics") + "/explain")
        assert reply.status == status
        assert json.loads(reply.body) == {"error": "ask about one entity"}
        assert explainer.asked == [""]


def test_without_an_explainer_explain_is_not_a_path_of_its_own(registry: CollectorRegistry) -> None:
    # prometheus-client answers any path with the registry: no explanation is made up.
    with MetricsEndpoint("127.0.0.1", 0).serve(registry) as server:
        reply = get(server.url.removesuffix("/metrics") + "/explain?job=x")
        assert reply.body == generate_latest(registry)
