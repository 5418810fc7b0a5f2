"""k8s/: every manifest parses, and names, ports, paths and config keys agree.

The manifests are checked against the project (the config models, the image) and against
each other: the Spark operator path and the spark-submit path must deploy the same pods,
the Service must reach the driver's metrics port, the ConfigMap must be mounted so that an
edit reaches the running job, and the checkpoint volume must be shared with the executors.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from conf import AppConfig, KafkaConfig, load_config
from sinks.inbound.metrics_server import HEALTH_PATH
from tests.deploy.manifests import (
    DOCKER,
    K8S,
    REPO,
    Pod,
    compose,
    copies,
    dockerfile,
    final,
    ingress_allowed,
    k8s_manifests,
    k8s_object,
    k8s_objects,
    load_yaml,
    pod_template,
    policy_selects,
    uncommented,
    yaml_docs,
)

NAMESPACE = "flinkwatch"
CLUSTER_SCOPED = {"Namespace"}
APP = k8s_object("SparkApplication", "flinkwatch")
CONFIG = load_config(K8S / "flinkwatch.yaml")


def container(template: dict[str, Any]) -> dict[str, Any]:
    (c,) = template["spec"]["containers"]
    return dict(c)


def mounts(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Mount path → {mount, volume} of a pod template's container."""
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    return {
        m["mountPath"]: {"mount": m, "volume": volumes[m["name"]]}
        for m in container(template).get("volumeMounts", [])
    }


def config_arg(arguments: list[str]) -> PurePosixPath:
    return PurePosixPath(arguments[arguments.index("--config") + 1])


def test_every_manifest_parses_and_lives_in_the_flinkwatch_namespace() -> None:
    files = k8s_manifests()
    assert {f.name for f in files} >= {
        "namespace.yaml",
        "rbac.yaml",
        "storage.yaml",
        "service.yaml",
        "monitoring.yaml",
        "networkpolicy.yaml",
        "sparkapplication.yaml",
        "slack-secret.yaml",
        "spark-auth-secret.yaml",
        "driver.yaml",
        "executor.yaml",
    }
    for f in files:
        for doc in yaml_docs(f):
            assert doc["apiVersion"] and doc["kind"], f
            if f.parent.name == "pod-templates":
                assert doc["kind"] == "Pod"
                continue
            meta = doc["metadata"]
            assert meta["labels"]["app.kubernetes.io/name"] == "flinkwatch", f
            if doc["kind"] in CLUSTER_SCOPED:
                assert meta["name"] == NAMESPACE
            else:
                assert meta["namespace"] == NAMESPACE, f"{f.name}: {doc['kind']}"


def test_kustomization_applies_the_base_and_generates_the_mounted_configmaps() -> None:
    kz = load_yaml(K8S / "kustomization.yaml")
    assert kz["namespace"] == NAMESPACE
    for res in kz["resources"]:
        assert (K8S / res).is_file()
    # The job itself, monitoring (operator CRDs), the secret and the NetworkPolicy (its
    # Prometheus selector is the cluster's to adjust) are applied on their own.
    on_their_own = {
        "sparkapplication.yaml",
        "monitoring.yaml",
        "slack-secret.yaml",
        "spark-auth-secret.yaml",
        "networkpolicy.yaml",
    }
    assert not on_their_own & set(kz["resources"])
    generators = {g["name"]: g for g in kz["configMapGenerator"]}
    for g in generators.values():
        for f in g["files"]:
            assert (K8S / f).is_file()
        # A hashed name would make each edit a new ConfigMap the running driver never sees.
        assert g["options"]["disableNameSuffixHash"] is True
    config_volume = mounts(pod_template("driver"))[str(config_arg(APP["spec"]["arguments"]).parent)]
    cm = config_volume["volume"]["configMap"]["name"]
    assert [PurePosixPath(f).name for f in generators[cm]["files"]] == [
        config_arg(APP["spec"]["arguments"]).name
    ]
    dashboard = generators["flinkwatch-dashboard"]
    assert dashboard["files"] == ["dashboards/flinkwatch.json"]
    assert dashboard["options"]["labels"]["grafana_dashboard"] == "1"


def test_config_mount_lets_an_edit_reach_the_running_job() -> None:
    # ConfigMap updates arrive by a symlink swap inside the mounted directory; a subPath
    # mount is a bind of one file and never changes (tests/conf/test_reload.py covers the swap).
    target = config_arg(APP["spec"]["arguments"])
    entry = mounts(pod_template("driver"))[str(target.parent)]
    assert "subPath" not in entry["mount"] and "subPathExpr" not in entry["mount"]
    assert entry["mount"]["readOnly"] is True
    assert "configMap" in entry["volume"]
    assert CONFIG.reload_interval_s <= 60


def test_the_cluster_config_is_valid_and_fits_the_pods() -> None:
    assert isinstance(CONFIG, AppConfig)
    assert CONFIG.spark.master.startswith("k8s://")
    assert CONFIG.metrics.host == "0.0.0.0"  # noqa: S104 - the Service reaches the pod IP
    executor = APP["spec"]["executor"]
    assert CONFIG.spark.shuffle_partitions >= executor["instances"] * executor["cores"]
    driver_mounts = mounts(pod_template("driver"))
    executor_mounts = mounts(pod_template("executor"))
    state = driver_mounts[str(CONFIG.output.state_dir)]
    checkpoints = str(CONFIG.output.checkpoint_dir)
    # Checkpoints and state snapshots: one volume, driver and executors.
    shared = driver_mounts[checkpoints]["volume"]["persistentVolumeClaim"]["claimName"]
    assert executor_mounts[checkpoints]["volume"]["persistentVolumeClaim"]["claimName"] == shared
    claims = {
        o["metadata"]["name"]: o for o in k8s_objects() if o["kind"] == "PersistentVolumeClaim"
    }
    assert claims[shared]["spec"]["accessModes"] == ["ReadWriteMany"]
    # The ledger (SQLite, WAL) stays on the driver's own volume.
    own = state["volume"]["persistentVolumeClaim"]["claimName"]
    assert claims[own]["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert CONFIG.output.ledger_path.parent == CONFIG.output.state_dir
    assert not CONFIG.output.ledger_path.is_relative_to(CONFIG.output.checkpoint_dir)
    assert set(claims) == {shared, own}


def test_slack_token_reaches_the_driver_from_the_secret() -> None:
    assert CONFIG.slack.mode == "bot"
    (var,) = [
        e for e in container(pod_template("driver"))["env"] if e["name"] == CONFIG.slack.token_env
    ]
    ref = var["valueFrom"]["secretKeyRef"]
    secret = k8s_object("Secret", ref["name"])
    assert ref["key"] in secret["stringData"]
    # Optional: a cluster without Slack (mode "off") needs no Secret to start the driver.
    assert ref["optional"] is True
    # Executors never talk to Slack; the token stays on the driver.
    assert "env" not in container(pod_template("executor"))


def kafka_security_example() -> KafkaConfig:
    """The commented SASL_SSL example of k8s/flinkwatch.yaml, uncommented and loaded."""
    text = (K8S / "flinkwatch.yaml").read_text()
    section = re.search(r"^kafka:\n(.*?)^\S", text, re.M | re.S)
    assert section is not None
    keys = [
        m.group(1)
        for line in section.group(1).splitlines()
        if (m := re.fullmatch(r"  # (\w+: \S.*)", line))
    ]
    return KafkaConfig.model_validate(yaml.safe_load("\n".join(keys)))


def test_kafka_password_and_ca_reach_the_driver_from_the_secret_the_example_names() -> None:
    example = kafka_security_example()
    assert example.security_protocol == "SASL_SSL" and example.ssl_ca_file is not None
    (var,) = [
        e
        for e in container(pod_template("driver"))["env"]
        if e["name"] == example.sasl_password_env
    ]
    ref = var["valueFrom"]["secretKeyRef"]
    secret = k8s_object("Secret", ref["name"])
    assert ref["key"] in secret["stringData"]
    # Optional: a plaintext Kafka needs no Secret.
    assert ref["optional"] is True
    ca = PurePosixPath(example.ssl_ca_file)
    entry = mounts(pod_template("driver"))[str(ca.parent)]
    source = entry["volume"]["secret"]
    assert source["secretName"] == ref["name"] and source["optional"] is True
    (item,) = [i for i in source["items"] if i["path"] == ca.name]
    assert "BEGIN CERTIFICATE" in secret["stringData"][item["key"]]
    # The executors get the password and the CA's content with the query's options.
    assert str(ca.parent) not in mounts(pod_template("executor"))
    assert "kafka-secret.yaml" not in load_yaml(K8S / "kustomization.yaml")["resources"]


def test_spark_application_runs_the_pod_templates_of_spark_submit() -> None:
    spec = APP["spec"]
    for role in ("driver", "executor"):
        template = pod_template(role)
        assert spec[role]["template"]["spec"] == template["spec"], role
        assert spec[role]["template"]["metadata"] == template["metadata"], role
        assert spec[role]["labels"] == template["metadata"]["labels"], role
    assert spec["driver"]["serviceAccount"] == pod_template("driver")["spec"]["serviceAccountName"]
    assert container(pod_template("driver"))["name"] == "spark-kubernetes-driver"
    assert container(pod_template("executor"))["name"] == "spark-kubernetes-executor"
    assert spec["restartPolicy"]["type"] == "Always"


def test_spark_application_runs_the_image_entry_point() -> None:
    spec = APP["spec"]
    image = dockerfile()
    main_dest = [dest for srcs, dest, _ in copies(image) if srcs == ["docker/main.py"]]
    assert spec["mainApplicationFile"] == f"local://{main_dest[0]}"
    assert spec["type"] == "Python" and spec["mode"] == "cluster"
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    pins = [d for d in pyproject["project"]["dependencies"] if d.startswith("pyspark==")]
    assert spec["sparkVersion"] == pins[0].split("==")[1]
    # The same command the image runs by default, with the config at the mounted path.
    cmd = final(image, "CMD").exec_form()
    assert spec["arguments"] == cmd[cmd.index("flinkwatch") + 1 :]
    assert spec["image"] == compose()["services"]["flinkwatch"]["image"]


@pytest.fixture
def fake_spark_submit(tmp_path: Path) -> Path:
    """A spark-submit stand-in that writes its arguments to args.json."""
    script = tmp_path / "spark-submit"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "open(os.environ['ARGS_OUT'], 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def submit(fake: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(K8S / "spark-submit.sh")],
        env={"PATH": os.environ["PATH"], "SPARK_SUBMIT": str(fake), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_spark_submit_recipe_submits_what_the_spark_application_runs(
    fake_spark_submit: Path, tmp_path: Path
) -> None:
    out = tmp_path / "args.json"
    run = submit(fake_spark_submit, K8S_API="https://10.0.0.1:6443", ARGS_OUT=str(out))
    assert run.returncode == 0, run.stderr
    args = json.loads(out.read_text())
    confs = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--conf")
    assert args[args.index("--master") + 1] == "k8s://https://10.0.0.1:6443"
    assert args[args.index("--deploy-mode") + 1] == "cluster"
    spec = APP["spec"]
    main = args.index(spec["mainApplicationFile"])
    assert args[main + 1 :] == spec["arguments"]
    assert confs["spark.kubernetes.namespace"] == APP["metadata"]["namespace"]
    assert confs["spark.kubernetes.container.image"] == spec["image"]
    assert (
        confs["spark.kubernetes.authenticate.driver.serviceAccountName"]
        == (spec["driver"]["serviceAccount"])
    )
    for role in ("driver", "executor"):
        path = Path(confs[f"spark.kubernetes.{role}.podTemplateFile"])
        assert path.resolve() == (K8S / "pod-templates" / f"{role}.yaml").resolve()
        for key in ("cores", "memory", "memoryOverhead"):
            assert confs[f"spark.{role}.{key}"] == str(spec[role][key]), f"{role}.{key}"
    assert confs["spark.executor.instances"] == str(spec["executor"]["instances"])
    # The driver pod must not keep spark-submit waiting: the job runs until stopped.
    assert confs["spark.kubernetes.submission.waitAppCompletion"] == "false"


def test_spark_submit_recipe_names_what_is_missing(fake_spark_submit: Path, tmp_path: Path) -> None:
    run = submit(fake_spark_submit, ARGS_OUT=str(tmp_path / "args.json"))
    assert run.returncode != 0
    assert "K8S_API" in run.stderr
    assert not (tmp_path / "args.json").exists()


def test_metrics_service_reaches_the_driver_metrics_port() -> None:
    service = k8s_object("Service", "flinkwatch")
    driver = pod_template("driver")
    assert service["spec"]["selector"].items() <= driver["metadata"]["labels"].items()
    executor = pod_template("executor")
    assert not service["spec"]["selector"].items() <= executor["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    (named,) = [p for p in container(driver)["ports"] if p["name"] == port["targetPort"]]
    assert named["containerPort"] == CONFIG.metrics.port == port["port"]
    # A TCP check: an HTTP GET would fail once HTTPS, basic auth or mutual TLS is on.
    probe = container(driver)["readinessProbe"]
    assert "httpGet" not in probe
    assert probe["tcpSocket"] == {"port": named["name"]}
    annotations = service["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(CONFIG.metrics.port)
    assert annotations["prometheus.io/path"] == "/metrics"


def test_service_monitor_scrapes_the_service_as_job_flinkwatch() -> None:
    service = k8s_object("Service", "flinkwatch")
    monitor = k8s_object("ServiceMonitor")
    spec = monitor["spec"]
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert service["metadata"]["namespace"] in spec["namespaceSelector"]["matchNames"]
    (endpoint,) = spec["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"
    # Without jobLabel, the operator labels series job=<Service name>; the rules, the
    # dashboard and the compose scrape job all use job="flinkwatch".
    assert "jobLabel" not in spec
    assert service["metadata"]["name"] == "flinkwatch"
    scrape_jobs = load_yaml(REPO / "docker/prometheus/prometheus.yml")["scrape_configs"]
    assert "flinkwatch" in [j["job_name"] for j in scrape_jobs]


def test_driver_may_create_its_executors() -> None:
    account = APP["spec"]["driver"]["serviceAccount"]
    k8s_object("ServiceAccount", account)
    binding = k8s_object("RoleBinding")
    assert {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE} in binding[
        "subjects"
    ]
    role = k8s_object("Role", binding["roleRef"]["name"])
    granted = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    for resource in ("pods", "services", "configmaps", "persistentvolumeclaims"):
        for verb in ("create", "get", "list", "watch", "delete"):
            assert (resource, verb) in granted


def test_every_volume_claim_the_pods_use_exists() -> None:
    claims = {o["metadata"]["name"] for o in k8s_objects() if o["kind"] == "PersistentVolumeClaim"}
    for role in ("driver", "executor"):
        for v in pod_template(role)["spec"]["volumes"]:
            if "persistentVolumeClaim" in v:
                assert v["persistentVolumeClaim"]["claimName"] in claims


def test_pods_run_as_the_image_user_without_privileges() -> None:
    user = final(dockerfile(), "USER").args
    for role in ("driver", "executor"):
        template = pod_template(role)
        ctx = template["spec"]["securityContext"]
        assert ctx["runAsNonRoot"] is True
        assert str(ctx["runAsUser"]) == user
        assert ctx["fsGroup"] == ctx["runAsGroup"]  # volumes writable by the job
        sc = container(template)["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]


def test_network_policy_admits_prometheus_to_the_metrics_port_and_executors_to_the_driver() -> None:
    policy = k8s_object("NetworkPolicy")
    driver_template, executor_template = pod_template("driver"), pod_template("executor")
    named = {p["name"]: p["containerPort"] for p in container(driver_template)["ports"]}
    driver = Pod(NAMESPACE, driver_template["metadata"]["labels"], named)
    executor = Pod(NAMESPACE, executor_template["metadata"]["labels"])
    assert policy_selects(policy, driver)
    # Ingress only: egress to Kafka, Slack and the API server is left alone, and the
    # executors (not selected) keep accepting shuffle and driver traffic.
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert not policy_selects(policy, executor)

    metrics, rpc, block_manager = CONFIG.metrics.port, 7078, 7079
    prometheus = Pod("monitoring", {"app.kubernetes.io/name": "prometheus"})
    assert ingress_allowed(policy, prometheus, driver, metrics)
    assert not ingress_allowed(policy, prometheus, driver, rpc)
    # Neither another pod of the monitoring namespace, nor a pod that only calls itself
    # Prometheus elsewhere, nor anything else in flinkwatch's own namespace.
    grafana = Pod("monitoring", {"app.kubernetes.io/name": "grafana"})
    impostor = Pod("default", {"app.kubernetes.io/name": "prometheus"})
    neighbour = Pod(NAMESPACE, {"app": "debug-shell"})
    for source in (grafana, impostor, neighbour):
        assert not ingress_allowed(policy, source, driver, metrics), source
    # The executors reach the driver's RPC and block-manager ports.
    assert ingress_allowed(policy, executor, driver, rpc)
    assert ingress_allowed(policy, executor, driver, block_manager)


def test_metrics_tls_and_basic_auth_turn_on_with_secrets_the_driver_already_reads() -> None:
    # Shipped off: plain HTTP, as before.
    assert not CONFIG.metrics.tls and CONFIG.metrics.basic_auth_username is None
    on = AppConfig.model_validate(
        yaml.safe_load(uncommented(K8S / "flinkwatch.yaml", "and uncomment:"))
    ).metrics
    assert on.tls and on.basic_auth_username == "prometheus"
    assert on.tls_cert_file is not None and on.tls_key_file is not None

    driver = pod_template("driver")
    # The certificate and key: files of the TLS Secret, mounted (optional) read-only.
    tls_mount = mounts(driver)[str(on.tls_cert_file.parent)]
    assert on.tls_key_file.parent == on.tls_cert_file.parent
    assert tls_mount["mount"]["readOnly"] is True
    tls_secret = tls_mount["volume"]["secret"]
    assert tls_secret["optional"] is True  # nothing to create while TLS is off
    assert {on.tls_cert_file.name, on.tls_key_file.name} == {"tls.crt", "tls.key"}  # type tls
    # The password: the variable the config names, from the auth Secret (optional).
    (var,) = [e for e in container(driver)["env"] if e["name"] == on.basic_auth_password_env]
    password_ref = var["valueFrom"]["secretKeyRef"]
    assert password_ref["optional"] is True
    executor = pod_template("executor")
    assert "metrics-tls" not in {v["name"] for v in executor["spec"]["volumes"]}

    # Prometheus (the ServiceMonitor) uses the same Secrets and a name the certificate holds.
    (monitor,) = [
        d
        for d in yaml.safe_load_all(uncommented(K8S / "monitoring.yaml", "uncomment:"))
        if d and d["kind"] == "ServiceMonitor"
    ]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"]["ca"]["secret"]["name"] == tls_secret["secretName"]
    service = k8s_object("Service", "flinkwatch")
    assert endpoint["tlsConfig"]["serverName"] == f"{service['metadata']['name']}.{NAMESPACE}.svc"
    auth = endpoint["basicAuth"]
    assert auth["password"] == {"name": password_ref["name"], "key": password_ref["key"]}
    assert auth["username"]["name"] == password_ref["name"]


def spark_submit_confs(fake: Path, tmp_path: Path) -> dict[str, str]:
    out = tmp_path / "args.json"
    run = submit(fake, K8S_API="https://10.0.0.1:6443", ARGS_OUT=str(out))
    assert run.returncode == 0, run.stderr
    args = json.loads(out.read_text())
    return dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--conf")


def test_the_driver_is_restarted_when_the_detect_query_stops_making_progress() -> None:
    driver = container(pod_template("driver"))
    named = {p["name"]: p["containerPort"] for p in driver["ports"]}
    # A hung driver keeps its ports open: liveness asks /healthz, which answers 503 once
    # the detect query has made no progress for metrics.health_max_age_s.
    probe = driver["livenessProbe"]
    assert probe["httpGet"]["path"] == HEALTH_PATH
    assert named[probe["httpGet"]["port"]] == CONFIG.metrics.health_port
    assert probe["httpGet"].get("scheme", "HTTP") == "HTTP"  # the health port is plain HTTP
    assert CONFIG.metrics.health_port != CONFIG.metrics.port
    # Spark's start is not a hang: liveness counts only once the health port listens,
    # and the startup probe waits minutes for it.
    startup = driver["startupProbe"]
    assert named[startup["tcpSocket"]["port"]] == CONFIG.metrics.health_port
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 180
    # Not the readiness probe: a stalled driver still serves /metrics (Prometheus sees it).
    assert "tcpSocket" in driver["readinessProbe"]
    assert probe["timeoutSeconds"] >= 5 and probe["failureThreshold"] >= 2
    # The kubelet probes from the node (always admitted); Prometheus is not let in there.
    policy = k8s_object("NetworkPolicy")
    pod = Pod(NAMESPACE, pod_template("driver")["metadata"]["labels"], named)
    prometheus = Pod("monitoring", {"app.kubernetes.io/name": "prometheus"})
    assert not ingress_allowed(policy, prometheus, pod, CONFIG.metrics.health_port)


def test_pods_run_with_a_read_only_root_and_writable_scratch_volumes() -> None:
    workdir = final(dockerfile(), "WORKDIR").args
    for role in ("driver", "executor"):
        template = pod_template(role)
        sc = container(template)["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True, role
        assert sc["runAsNonRoot"] is True, role
        assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
        by_path = mounts(template)
        # The JVM, the Python workers and native libraries write to /tmp.
        assert "emptyDir" in by_path["/tmp"]["volume"], role
        # Spark takes a mounted volume named spark-local-dir-* as its local dir (shuffle
        # files, RocksDB state stores) instead of making one on the root file system.
        local = [m for m in by_path.values() if m["mount"]["name"].startswith("spark-local-dir-")]
        assert local and all("emptyDir" in m["volume"] for m in local), role
        # The image's working directory is writable: the driver's state volume, a scratch
        # volume in the executors.
        assert workdir in by_path, role
        assert not by_path[workdir]["mount"].get("readOnly"), role


def test_executors_run_without_the_kubernetes_api(fake_spark_submit: Path, tmp_path: Path) -> None:
    executor = pod_template("executor")["spec"]
    account = executor["serviceAccountName"]
    assert account not in ("default", APP["spec"]["driver"]["serviceAccount"])
    assert executor["automountServiceAccountToken"] is False
    sa = k8s_object("ServiceAccount", account)
    assert sa["automountServiceAccountToken"] is False
    bound = [s["name"] for b in k8s_objects() if b["kind"] == "RoleBinding" for s in b["subjects"]]
    assert account not in bound
    # Both ways of starting the job name it (Spark sets it on the executor pods it makes).
    assert APP["spec"]["executor"]["serviceAccount"] == account
    confs = spark_submit_confs(fake_spark_submit, tmp_path)
    assert confs["spark.kubernetes.authenticate.executor.serviceAccountName"] == account
    # The driver keeps its token: it creates the executor pods.
    assert pod_template("driver")["spec"].get("automountServiceAccountToken", True) is True


def test_spark_traffic_is_authenticated_and_encrypted_with_the_key_of_a_secret(
    fake_spark_submit: Path, tmp_path: Path
) -> None:
    conf = APP["spec"]["sparkConf"]
    assert conf["spark.authenticate"] == "true"
    assert conf["spark.network.crypto.enabled"] == "true"
    assert conf["spark.network.crypto.cipher"] == "AES/GCM/NoPadding"
    assert conf["spark.network.crypto.saslFallback"] == "false"
    assert conf["spark.io.encryption.enabled"] == "true"
    # spark-submit passes the very same settings.
    confs = spark_submit_confs(fake_spark_submit, tmp_path)
    assert {k: confs.get(k) for k in conf} == conf
    # The key is a file from a Secret mounted in driver and executors alike (Spark would
    # otherwise make one and put it in the executors' pod spec as an environment variable).
    key = PurePosixPath(conf["spark.authenticate.secret.file"])
    sources = []
    for role in ("driver", "executor"):
        entry = mounts(pod_template(role))[str(key.parent)]
        assert entry["mount"]["readOnly"] is True
        secret = entry["volume"]["secret"]
        assert not secret.get("optional", False), role  # no key, no start
        (item,) = [i for i in secret["items"] if i["path"] == key.name]
        sources.append((secret["secretName"], item["key"]))
        assert secret["defaultMode"] & 0o007 == 0, role  # not world-readable
    assert sources[0] == sources[1]
    name, item_key = sources[0]
    assert item_key in k8s_object("Secret", name)["stringData"]
    assert "spark-auth-secret.yaml" not in load_yaml(K8S / "kustomization.yaml")["resources"]


def test_the_connector_jars_of_the_image_are_on_driver_and_executor_class_paths(
    fake_spark_submit: Path, tmp_path: Path
) -> None:
    # Under spark-submit the driver's JVM runs before the session sets spark.jars, which
    # then reaches the executors only: the driver would not find the kafka source.
    jars = re.search(r"FLINKWATCH_SPARK_JARS=(\S+)", (DOCKER / "Dockerfile").read_text())
    assert jars is not None
    want = f"{jars[1]}/*"
    conf = APP["spec"]["sparkConf"]
    confs = spark_submit_confs(fake_spark_submit, tmp_path)
    for role in ("driver", "executor"):
        key = f"spark.{role}.extraClassPath"
        assert conf[key] == want, role
        assert confs[key] == want, role
