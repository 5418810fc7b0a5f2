"""docker/: the image and the compose stack agree with the project and with each other.

Nothing here builds an image (there is no Docker daemon in CI); the files are parsed and
checked against pyproject.toml, scripts/, the config models and each other, and the
Prometheus config goes through the real promtool.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import tomllib
import urllib.parse
from pathlib import Path, PurePosixPath

import pytest
import yaml

from conf import AppConfig, load_config
from tests.deploy.manifests import (
    COMPOSE,
    DOCKER,
    REPO,
    base_images,
    compose,
    copies,
    dockerfile,
    dockerfile_args,
    env,
    final,
    image_tag,
    load_yaml,
    promtool,
    uncommented,
)

IMAGE = dockerfile()
COMPOSE_DOC = compose()
SERVICES = COMPOSE_DOC["services"]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def cmd_config_path() -> PurePosixPath:
    """The --config file the image's default command reads."""
    cmd = final(IMAGE, "CMD").exec_form()
    return PurePosixPath(cmd[cmd.index("--config") + 1])


def compose_config():
    """The job's config as compose runs it: the file mounted at the image's --config path."""
    target = cmd_config_path()
    for mount in SERVICES["flinkwatch"]["volumes"]:
        source, dest, *_ = mount.split(":")
        if PurePosixPath(dest) == target.parent:
            return load_config(DOCKER / source / target.name)
    pytest.fail(f"compose mounts nothing at {target.parent}")


def test_every_image_is_pinned_to_a_release() -> None:
    refs = base_images(IMAGE) + [s["image"] for s in SERVICES.values()]
    for ref in refs:
        tag = image_tag(ref)
        assert tag and tag != "latest" and re.search(r"\d+\.\d+", tag), f"unpinned image {ref}"
    # The runtime is the Python the project supports and the Spark pyproject pins.
    pyspark = next(d for d in PYPROJECT["project"]["dependencies"] if d.startswith("pyspark=="))
    spark_version = pyspark.split("==")[1]
    args = dockerfile_args(IMAGE)
    assert image_tag(args["SPARK_IMAGE"]).startswith(f"{spark_version}-scala2.13-")
    python = re.match(r"(\d+)\.(\d+)", image_tag(args["PYTHON_IMAGE"]))
    assert python is not None
    minimum = re.search(r"(\d+)\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert minimum is not None
    assert (int(python[1]), int(python[2])) >= (int(minimum[1]), int(minimum[2]))


def test_spark_home_is_the_pyspark_of_the_image_python() -> None:
    python = re.match(r"(\d+\.\d+)", image_tag(dockerfile_args(IMAGE)["PYTHON_IMAGE"]))
    assert python is not None
    e = env(IMAGE)
    venv = e["PYSPARK_PYTHON"].rsplit("/bin/", 1)[0]
    assert e["SPARK_HOME"] == f"{venv}/lib/python{python[1]}/site-packages/pyspark"
    assert e["PYSPARK_DRIVER_PYTHON"] == e["PYSPARK_PYTHON"]
    assert e["PATH"].startswith(f"{venv}/bin:")


def test_connector_jars_come_from_the_stack_pom_with_the_same_filter() -> None:
    run = next(i for i in IMAGE if i.op == "RUN" and "dependency:copy-dependencies" in i.args)
    pom = re.search(r"-f (\S+)", run.args)
    settings = re.search(r"-s (\S+)", run.args)
    ids = re.search(r"-DincludeArtifactIds=(\S+)", run.args)
    assert pom and settings and ids
    assert (REPO / pom[1]) == REPO / "scripts/maven/spark-kafka/pom.xml"
    assert (REPO / settings[1]).is_file()
    stack = (REPO / "scripts/stack.sh").read_text()
    stack_ids = re.search(r'fetch_one spark-kafka "([^"]+)"', stack)
    assert stack_ids is not None
    assert ids[1] == stack_ids[1]
    # The jars land where the job looks for them (streaming/session.py reads this variable).
    out_dir = re.search(r"-DoutputDirectory=(\S+)", run.args)
    assert out_dir is not None
    jar_copy = [dest for src, dest, stage in copies(IMAGE) if stage == "jars"]
    assert jar_copy and env(IMAGE)["FLINKWATCH_SPARK_JARS"].rstrip("/") == jar_copy[0].rstrip("/")


def test_image_installs_every_package_pyproject_ships() -> None:
    copied = {
        PurePosixPath(s).parts[0] for srcs, _, stage in copies(IMAGE) if not stage for s in srcs
    }
    for pattern in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]:
        package = pattern.rstrip("*")
        assert package in copied, f"package {package} is not copied into the image"
        assert any((REPO / package).glob("*.py"))  # streaming/ is a namespace package
    assert {"pyproject.toml", "README.md"} <= copied  # README: the package's long description
    assert any(i.op == "RUN" and re.search(r"/bin/pip install /src\b", i.args) for i in IMAGE)
    for srcs, _, stage in copies(IMAGE):
        if stage is None:
            for src in srcs:
                assert (REPO / src).exists(), f"COPY source {src} is missing"


def test_image_runs_as_non_root_and_checks_health_on_the_metrics_port() -> None:
    user = final(IMAGE, "USER").args
    assert user not in ("root", "0") and not user.startswith("0:")
    cfg = compose_config()
    exposed = {int(p.split("/")[0]) for i in IMAGE if i.op == "EXPOSE" for p in i.args.split()}
    assert exposed == {cfg.metrics.port}
    check = " ".join(final(IMAGE, "HEALTHCHECK").exec_form())
    url = re.search(r"http://[^'\"]+", check)
    assert url is not None
    parsed = urllib.parse.urlsplit(url[0])
    assert parsed.port == cfg.metrics.port and parsed.path == "/metrics"
    assert "flinkwatch_config_info" in check  # a metric the collector always exports
    assert cfg.metrics.host == "0.0.0.0"  # noqa: S104 - scraped from another container


def test_default_command_runs_the_job_on_the_packaged_container_config() -> None:
    cmd = final(IMAGE, "CMD").exec_form()
    assert cmd[cmd.index("flinkwatch") :][:2] == ["flinkwatch", "run"]
    target = cmd_config_path()
    baked = [
        dest for srcs, dest, stage in copies(IMAGE) if srcs == ["docker/config/flinkwatch.yaml"]
    ]
    assert baked == [str(target)]
    cfg = compose_config()
    assert str(cfg.output.state_dir) == final(IMAGE, "WORKDIR").args
    assert cfg.output.state_dir.is_absolute()


def test_spark_submit_entry_file_is_the_flinkwatch_command(tmp_path: Path) -> None:
    main_copy = [dest for srcs, dest, _ in copies(IMAGE) if srcs == ["docker/main.py"]]
    assert main_copy == ["/opt/flinkwatch/main.py"]
    ok = subprocess.run(
        [
            sys.executable,
            str(DOCKER / "main.py"),
            "config",
            "check",
            str(DOCKER / "config/flinkwatch.yaml"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    bad = tmp_path / "bad_port.yaml"
    bad.write_text("metrics: {port: 70000}\n")
    rejected = subprocess.run(
        [sys.executable, str(DOCKER / "main.py"), "config", "check", str(bad)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rejected.returncode != 0
    assert "metrics.port" in rejected.stdout + rejected.stderr


def test_compose_services_start_in_order() -> None:
    assert SERVICES["topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert "healthcheck" in SERVICES["kafka"]
    for name in ("flinkwatch", "simulate"):
        condition = SERVICES[name]["depends_on"]["topics"]["condition"]
        assert condition == "service_completed_successfully"
    # The one-shot services must not inherit the job's health check and stay "starting".
    for name in ("topics", "simulate"):
        assert SERVICES[name]["healthcheck"] == {"disable": True}
    assert SERVICES["simulate"]["profiles"] == ["demo"]


def test_compose_builds_the_image_from_this_repository() -> None:
    users = [s for s in SERVICES.values() if s["image"].startswith("flinkwatch:")]
    assert len(users) == 3
    for s in users:
        context = (COMPOSE.parent / s["build"]["context"]).resolve()
        assert context == REPO
        assert (context / s["build"]["dockerfile"]).resolve() == DOCKER / "Dockerfile"
    assert image_tag(users[0]["image"]) == PYPROJECT["project"]["version"]


def test_compose_kafka_is_a_kraft_broker_the_job_reaches() -> None:
    kafka = SERVICES["kafka"]["environment"]
    assert "controller" in kafka["KAFKA_PROCESS_ROLES"].split(",")
    assert not any(k.startswith("KAFKA_ZOOKEEPER") for k in kafka)
    node, voter = kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"].split("@")
    assert node == kafka["KAFKA_NODE_ID"]
    listeners = dict(x.split("://") for x in kafka["KAFKA_ADVERTISED_LISTENERS"].split(","))
    cfg = compose_config()
    assert listeners[kafka["KAFKA_INTER_BROKER_LISTENER_NAME"]] == cfg.kafka.bootstrap_servers
    host, port = cfg.kafka.bootstrap_servers.split(":")
    assert host == "kafka"
    bound = dict(x.split("://") for x in kafka["KAFKA_LISTENERS"].split(","))
    assert bound[kafka["KAFKA_INTER_BROKER_LISTENER_NAME"]] == f":{port}"
    assert voter.split(":")[1] == bound[kafka["KAFKA_CONTROLLER_LISTENER_NAMES"]].lstrip(":")
    # The host listener is the one published to the host.
    published = {p.rsplit(":", 1)[-1] for p in SERVICES["kafka"]["ports"]}
    assert published == {bound["HOST"].lstrip(":")}
    # KRaft formats storage with this id: 16 bytes, base64url without padding.
    cluster_id = str(kafka["CLUSTER_ID"])
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16 and len(cluster_id) == 22
    # Replayed history must not be deleted on arrival (see scripts/stack.sh).
    assert kafka["KAFKA_LOG_MESSAGE_TIMESTAMP_TYPE"] == "LogAppendTime"


def test_compose_creates_the_topics_the_job_reads() -> None:
    cfg = compose_config()
    cmd = SERVICES["topics"]["command"]
    assert SERVICES["simulate"]["command"][:4] == ["python", "-m", "lab", "simulate"]
    assert SERVICES["simulate"]["environment"]["PYTHONPATH"] == "/opt/flinkwatch/tools"
    # The demo tooling sits beside the product in the image, outside its wheel.
    tools = [dest for srcs, dest, stage in copies(IMAGE) if stage is None and srcs == ["lab/"]]
    assert [d.rstrip("/") for d in tools] == ["/opt/flinkwatch/tools/lab"]
    assert cmd[:3] == ["flinkwatch", "kafka", "create-topics"]
    assert cmd[cmd.index("--bootstrap") + 1] == cfg.kafka.bootstrap_servers
    # The positional arguments: neither an option nor an option's value.
    topics = [w for i, w in enumerate(cmd) if i > 2 and "--" not in (w[:2], cmd[i - 1][:2])]
    assert sorted(topics) == sorted([cfg.kafka.logs_topic, cfg.kafka.metrics_topic])
    sim = SERVICES["simulate"]["command"]
    assert PurePosixPath(sim[sim.index("--config") + 1]) == cmd_config_path()
    # Topics are made with the job's Kafka settings (security included), from the mount.
    assert PurePosixPath(cmd[cmd.index("--config") + 1]) == cmd_config_path()
    assert SERVICES["topics"]["volumes"] == SERVICES["simulate"]["volumes"]
    for name in ("topics", "flinkwatch", "simulate"):
        assert "FLINKWATCH_KAFKA_PASSWORD" in SERVICES[name]["environment"], name


def test_compose_prometheus_scrapes_the_job_and_loads_the_rules() -> None:
    cfg = compose_config()
    published = {p.rsplit(":", 1)[-1] for p in SERVICES["flinkwatch"]["ports"]}
    assert published == {str(cfg.metrics.port)}
    prom = SERVICES["prometheus"]
    config_flag = next(a for a in prom["command"] if a.startswith("--config.file="))
    config_in_container = PurePosixPath(config_flag.split("=", 1)[1])
    source, dest = prom["volumes"][0].split(":")[:2]
    assert PurePosixPath(dest) == config_in_container.parent
    prom_config = load_yaml(DOCKER / source / config_in_container.name)
    (job,) = [j for j in prom_config["scrape_configs"] if j["job_name"] == "flinkwatch"]
    assert job["static_configs"][0]["targets"] == [f"flinkwatch:{cfg.metrics.port}"]
    assert [(DOCKER / source / r).is_file() for r in prom_config["rule_files"]] == [True]


@pytest.mark.parametrize("name", ["prometheus.yml", "prometheus-tls.yml"])
def test_compose_prometheus_config_passes_promtool(name: str) -> None:
    tool = promtool()
    if tool is None:
        pytest.fail("no promtool: run `scripts/prometheus.sh fetch` (make test does)")
    out = subprocess.run(
        [str(tool), "check", "config", str(DOCKER / "prometheus" / name)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 rule files found" in out.stdout + out.stderr


def test_compose_grafana_provisions_the_datasource_and_the_dashboard() -> None:
    grafana = SERVICES["grafana"]
    mounts = {
        PurePosixPath(dest): source
        for source, dest, *_ in (v.split(":") for v in grafana["volumes"])
    }
    provisioning = DOCKER / mounts[PurePosixPath("/etc/grafana/provisioning")]
    (provider,) = load_yaml(provisioning / "dashboards/flinkwatch.yaml")["providers"]
    dash_dir = PurePosixPath(provider["options"]["path"])
    assert (COMPOSE.parent / mounts[dash_dir] / "flinkwatch.json").resolve() == (
        REPO / "k8s/dashboards/flinkwatch.json"
    )
    home = PurePosixPath(grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    assert home.parent == dash_dir
    (ds,) = load_yaml(provisioning / "datasources/prometheus.yaml")["datasources"]
    url = urllib.parse.urlsplit(ds["url"])
    assert url.hostname in SERVICES and url.hostname == "prometheus"
    assert f"127.0.0.1:{url.port}:{url.port}" in SERVICES["prometheus"]["ports"]
    # $__rate_interval is sized from timeInterval: it must be the real scrape interval.
    prom_config = load_yaml(DOCKER / "prometheus/prometheus.yml")
    assert ds["jsonData"]["timeInterval"] == prom_config["global"]["scrape_interval"]


def test_compose_publishes_ports_on_localhost_only() -> None:
    for name, service in SERVICES.items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} on every interface"


# --- HTTPS and basic auth on /metrics (compose.metrics-tls.yaml) ----------------------------

TLS_OVERRIDE = load_yaml(DOCKER / "compose.metrics-tls.yaml")["services"]


def tls_config() -> AppConfig:
    """docker/config/flinkwatch.yaml with its HTTPS and basic-auth lines uncommented."""
    text = uncommented(DOCKER / "config/flinkwatch.yaml", "compose.metrics-tls.yaml")
    return AppConfig.model_validate(yaml.safe_load(text))


def mounted(service: dict, source: str) -> PurePosixPath:
    """Where a service mounts ``source`` (a path relative to docker/)."""
    (dest,) = [
        PurePosixPath(v.split(":")[1]) for v in service["volumes"] if v.split(":")[0] == source
    ]
    return dest


def test_compose_tls_override_serves_https_with_basic_auth_from_the_secrets_directory() -> None:
    # Shipped off: compose.yaml alone serves plain HTTP, as before.
    assert not compose_config().metrics.tls
    on = tls_config().metrics
    assert on.tls and on.basic_auth_username and on.tls_cert_file and on.tls_key_file
    job = TLS_OVERRIDE["flinkwatch"]
    secrets = mounted(job, "./secrets")
    assert on.tls_cert_file.parent == on.tls_key_file.parent == secrets
    assert all(v.endswith(":ro") for v in job["volumes"])
    assert on.basic_auth_password_env in job["environment"]
    # The certificate, key and password never reach git or the image's build context.
    assert "docker/secrets/" in (REPO / ".gitignore").read_text().splitlines()
    assert "docker/secrets" in (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()


def test_compose_tls_override_points_prometheus_at_https_with_the_same_credentials() -> None:
    on = tls_config().metrics
    base, override = SERVICES["prometheus"], TLS_OVERRIDE["prometheus"]
    flag = next(a for a in override["command"] if a.startswith("--config.file="))
    config_path = PurePosixPath(flag.split("=", 1)[1])
    # The same flags but the config file, read from the directory compose.yaml mounts.
    same = [a for a in override["command"] if a != flag]
    assert same == [a for a in base["command"] if not a.startswith("--config.file=")]
    assert config_path.parent == mounted(base, "./prometheus")
    tls = load_yaml(DOCKER / "prometheus" / config_path.name)
    (job,) = [j for j in tls["scrape_configs"] if j["job_name"] == "flinkwatch"]
    secrets = mounted(override, "./secrets")
    assert job["scheme"] == "https"
    assert PurePosixPath(job["tls_config"]["ca_file"]) == secrets / on.tls_cert_file.name
    assert PurePosixPath(job["basic_auth"]["password_file"]).parent == secrets
    assert job["basic_auth"]["username"] == on.basic_auth_username
    # The target's host is the compose service, a name the documented certificate holds.
    (target,) = job["static_configs"][0]["targets"]
    assert target.split(":")[0] in SERVICES
    # Nothing else differs from the plain config (rules, intervals, the other jobs).
    for key in ("scheme", "tls_config", "basic_auth"):
        del job[key]
    assert tls == load_yaml(DOCKER / "prometheus/prometheus.yml")


def test_compose_tls_health_check_logs_in_over_https(tmp_path: Path) -> None:
    """The override's health check, run for real against an endpoint with TLS and auth."""
    from prometheus_client import CollectorRegistry, Gauge

    from sinks.inbound.metrics_server import BasicAuth, MetricsEndpoint, TlsFiles
    from tests.certs import self_signed

    on = tls_config().metrics
    assert on.basic_auth_username is not None
    cert, key = self_signed(tmp_path)
    registry = CollectorRegistry()
    Gauge("flinkwatch_config_info", "The config in force.", registry=registry).set(1)
    auth = BasicAuth(on.basic_auth_username, "s3cret")
    endpoint = MetricsEndpoint("127.0.0.1", 0, tls=TlsFiles(cert, key), auth=auth)
    check = TLS_OVERRIDE["flinkwatch"]["healthcheck"]["test"]
    assert check[:2] == ["CMD", "python"]
    with endpoint.serve(registry) as server:
        # The check's port is the configured one; here the endpoint has a free port.
        assert f":{on.port}/metrics" in check[-1]
        argv = [sys.executable, *check[2:-1], check[-1].replace(f":{on.port}/", f":{server.port}/")]

        def run(password: str) -> int:
            env = {"PATH": os.environ["PATH"], on.basic_auth_password_env: password}
            return subprocess.run(argv, env=env, capture_output=True, timeout=60).returncode

        assert run("s3cret\n") == 0
        assert run("wrong") != 0
