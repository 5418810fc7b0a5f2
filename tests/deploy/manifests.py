"""The deploy files (docker/, k8s/, the Grafana dashboard) as data, for the tests.

Nothing here knows what the files should say; it only reads them: YAML documents,
Dockerfile instructions, dashboard targets, and Grafana's variable substitution so a
panel's query can be sent to a real Prometheus the way Grafana would send it.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

import yaml

from lab.promserver import find_binary

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
K8S = REPO / "k8s"
DASHBOARD = K8S / "dashboards" / "flinkwatch.json"
COMPOSE = DOCKER / "compose.yaml"
RULES = DOCKER / "prometheus" / "rules.yml"

#: Files under k8s/ that are not Kubernetes objects.
NOT_OBJECTS = {"kustomization.yaml", "flinkwatch.yaml"}


def load_yaml(path: Path) -> Any:
    """One YAML document."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def yaml_docs(path: Path) -> list[dict[str, Any]]:
    """Every non-empty document of a multi-document YAML file."""
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def k8s_manifests() -> list[Path]:
    """The manifest files of k8s/ (pod templates included)."""
    objects = [f for f in sorted(K8S.glob("*.yaml")) if f.name not in NOT_OBJECTS]
    return objects + sorted((K8S / "pod-templates").glob("*.yaml"))


def k8s_objects() -> list[dict[str, Any]]:
    """Every object in k8s/*.yaml (not the pod templates, which have no name)."""
    return [
        d for f in sorted(K8S.glob("*.yaml")) if f.name not in NOT_OBJECTS for d in yaml_docs(f)
    ]


def k8s_object(kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of ``kind`` (and ``name``) in k8s/."""
    found = [
        o
        for o in k8s_objects()
        if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    if len(found) != 1:
        raise LookupError(f"expected one {kind} {name or ''} in k8s/, found {len(found)}")
    return found[0]


def pod_template(role: str) -> dict[str, Any]:
    """k8s/pod-templates/<role>.yaml (``driver`` or ``executor``)."""
    return dict(load_yaml(K8S / "pod-templates" / f"{role}.yaml"))


def compose() -> dict[str, Any]:
    """docker/compose.yaml, with its YAML merge keys resolved (as Compose does)."""
    return dict(load_yaml(COMPOSE))


# --- Dockerfile ------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction, continuation lines joined."""

    op: str
    args: str

    def exec_form(self) -> list[str]:
        """The JSON (exec) form of CMD/ENTRYPOINT/HEALTHCHECK CMD arguments."""
        text = self.args
        if self.op == "HEALTHCHECK":
            text = text.split(" CMD ", 1)[1]
        return list(json.loads(text))


def dockerfile(path: Path = DOCKER / "Dockerfile") -> list[Instruction]:
    """The instructions of a Dockerfile, in order."""
    out: list[Instruction] = []
    buf = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        op, _, args = buf.partition(" ")
        out.append(Instruction(op.upper(), " ".join(args.split())))
        buf = ""
    return out


def dockerfile_args(instructions: list[Instruction]) -> dict[str, str]:
    """Default values of the ARGs declared before the first FROM."""
    args: dict[str, str] = {}
    for ins in instructions:
        if ins.op == "FROM":
            break
        if ins.op == "ARG" and "=" in ins.args:
            name, value = ins.args.split("=", 1)
            args[name] = value
    return args


def base_images(instructions: list[Instruction]) -> list[str]:
    """The image of every FROM, ARGs resolved."""
    args = dockerfile_args(instructions)
    images = []
    for ins in instructions:
        if ins.op == "FROM":
            ref = ins.args.split()[0]
            images.append(re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], ref))
    return images


def env(instructions: list[Instruction]) -> dict[str, str]:
    """ENV settings of the final stage (``K=V`` form)."""
    last_from = max(i for i, ins in enumerate(instructions) if ins.op == "FROM")
    out: dict[str, str] = {}
    for ins in instructions[last_from:]:
        if ins.op == "ENV":
            for pair in shlex.split(ins.args):
                k, _, v = pair.partition("=")
                out[k] = v
    return out


def copies(instructions: list[Instruction]) -> list[tuple[list[str], str, str | None]]:
    """COPY instructions as (sources, destination, --from stage or None)."""
    out = []
    for ins in instructions:
        if ins.op != "COPY":
            continue
        words = ins.args.split()
        stage = None
        while words[0].startswith("--"):
            flag = words.pop(0)
            if flag.startswith("--from="):
                stage = flag.split("=", 1)[1]
        out.append((words[:-1], words[-1], stage))
    return out


def final(instructions: list[Instruction], op: str) -> Instruction:
    """The last ``op`` instruction (the one in force in the image)."""
    return [ins for ins in instructions if ins.op == op][-1]


def image_tag(ref: str) -> str:
    """``repo:tag`` → ``tag`` (empty when untagged)."""
    last = ref.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else ""


# --- dashboard -------------------------------------------------------------------------


def dashboard() -> dict[str, Any]:
    """The Grafana dashboard JSON."""
    return dict(json.loads(DASHBOARD.read_text(encoding="utf-8")))


def panels(dash: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that is not a row (also those inside collapsed rows)."""
    for p in dash["panels"]:
        if p["type"] == "row":
            yield from p.get("panels", [])
        else:
            yield p


@dataclass(frozen=True)
class Target:
    """One query of one panel."""

    panel: str
    ref_id: str
    expr: str
    instant: bool


def targets(dash: Mapping[str, Any]) -> list[Target]:
    """Every panel query of the dashboard."""
    return [
        Target(p["title"], t["refId"], t["expr"], bool(t.get("instant")))
        for p in panels(dash)
        for t in p.get("targets", [])
    ]


def variables(dash: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Template variables by name."""
    return {v["name"]: v for v in dash["templating"]["list"]}


_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def used_variables(expr: str) -> set[str]:
    """Names of the variables an expression refers to (``$x`` or ``${x}``)."""
    return {m.group(1) or m.group(2) for m in _VAR.finditer(expr)}


def render(expr: str, values: Mapping[str, str], rate_interval: str) -> str:
    """Substitute variables the way Grafana does before it sends a query.

    ``values`` maps a variable to the text Grafana puts in its place: the ``allValue``
    (``.*``) when "All" is selected, or a regex-escaped single value.
    """

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name == "__rate_interval":
            return rate_interval
        if name not in values:
            raise KeyError(f"no value for ${name} in {expr!r}")
        return values[name]

    return _VAR.sub(sub, expr)


def grafana_escape(value: str) -> str:
    """A selected value as Grafana's Prometheus datasource puts it in a ``=~`` matcher.

    Regex metacharacters get a backslash that survives PromQL's own string escaping
    (``a.b`` → ``a\\\\.b`` in the query text, ``a\\.b`` for the regex engine).
    """
    value = value.replace("\\", "\\\\\\\\")
    return re.sub(r"[$^*{}\[\]'+?.()|]", lambda m: "\\\\" + m.group(0), value)


_LABEL_VALUES = re.compile(r"^label_values\((?:(?P<selector>.+),\s*)?(?P<label>\w+)\)$", re.S)


def label_values_query(query: str) -> tuple[str | None, str]:
    """``label_values(selector, label)`` → (selector, label) as Grafana's Prometheus
    datasource sends it (``/api/v1/label/<label>/values?match[]=<selector>``)."""
    m = _LABEL_VALUES.match(query.strip())
    if m is None:
        raise ValueError(f"not a label_values() query: {query!r}")
    return m.group("selector"), m.group("label")


def all_values(dash: Mapping[str, Any]) -> dict[str, str]:
    """Each query variable's text when "All" is selected (its ``allValue``)."""
    return {
        name: v["allValue"]
        for name, v in variables(dash).items()
        if v["type"] == "query" and v.get("includeAll")
    }


# --- promtool --------------------------------------------------------------------------


def promtool() -> Path | None:
    """The promtool that comes with the test Prometheus binary, if any."""
    binary = find_binary()
    if binary is None:
        return None
    tool = binary.with_name("promtool")
    return tool if tool.is_file() else None


# --- commented-out examples ------------------------------------------------------------


def uncommented(path: Path, marker: str) -> str:
    """The file's text with the comment block after the line holding ``marker`` uncommented.

    The block is the run of comment lines right after the marker line; each loses its
    first ``# `` and keeps its indentation, which is what a user does to turn it on.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    (start,) = [i for i, line in enumerate(lines) if marker in line]
    end = start + 1
    while end < len(lines) and lines[end].lstrip().startswith("# "):
        indent = len(lines[end]) - len(lines[end].lstrip())
        lines[end] = lines[end][:indent] + lines[end][indent + 2 :]
        end += 1
    if end == start + 1:
        raise ValueError(f"{path.name}: no commented lines after {marker!r}")
    return "\n".join(lines) + "\n"


# --- NetworkPolicy ---------------------------------------------------------------------


def _selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A label selector (``matchLabels`` only; ``{}`` selects everything)."""
    selector = selector or {}
    if "matchExpressions" in selector:
        raise NotImplementedError("matchExpressions")
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


@dataclass(frozen=True)
class Pod:
    """A pod as a NetworkPolicy sees it: namespace, labels, named container ports."""

    namespace: str
    labels: Mapping[str, str]
    ports: Mapping[str, int] = dataclass_field(default_factory=dict)

    @property
    def namespace_labels(self) -> dict[str, str]:
        """The label every namespace carries (Kubernetes 1.21 and later)."""
        return {"kubernetes.io/metadata.name": self.namespace}


def policy_selects(policy: Mapping[str, Any], pod: Pod) -> bool:
    """Whether the policy applies to ``pod`` (same namespace, pod selector matches)."""
    meta, spec = policy["metadata"], policy["spec"]
    return bool(meta["namespace"] == pod.namespace and _selects(spec["podSelector"], pod.labels))


def ingress_allowed(policy: Mapping[str, Any], source: Pod, dest: Pod, port: int) -> bool:
    """Whether ``policy`` lets ``source`` open a TCP connection to ``dest`` on ``port``.

    Kubernetes' semantics for one policy selecting ``dest``: some ingress rule must match
    both the source (one of its peers; a peer with namespaceSelector and podSelector needs
    both) and the port (a number, or a name of ``dest``'s container ports).
    """
    if not policy_selects(policy, dest):
        raise ValueError("the policy does not select the destination pod")
    ns = policy["metadata"]["namespace"]

    def peer_matches(peer: Mapping[str, Any]) -> bool:
        if "ipBlock" in peer:
            return False  # pod addresses are not the tests' concern
        if "namespaceSelector" in peer:
            in_namespace = _selects(peer["namespaceSelector"], source.namespace_labels)
        else:
            in_namespace = source.namespace == ns
        return in_namespace and _selects(peer.get("podSelector"), source.labels)

    def port_matches(entry: Mapping[str, Any]) -> bool:
        if entry.get("protocol", "TCP") != "TCP":
            return False
        want = entry.get("port")
        if want is None:
            return True
        return (dest.ports.get(want) if isinstance(want, str) else want) == port

    for rule in policy["spec"].get("ingress") or []:
        peers, ports = rule.get("from"), rule.get("ports")
        if (not peers or any(peer_matches(p) for p in peers)) and (
            not ports or any(port_matches(e) for e in ports)
        ):
            return True
    return False
