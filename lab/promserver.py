"""A real Prometheus server for tests: configure, start, query, stop.

The binary comes from ``scripts/prometheus.sh fetch`` (Debian's ``prometheus`` package,
unpacked into ``$FLINKWATCH_STACK_DIR/prometheus/bin``) or from ``PATH``. Only the standard
library is used, so this works in any environment the tests run in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from lab.procs import free_port

REPO = Path(__file__).resolve().parent.parent
JOB_NAME = "flinkwatch"


class PrometheusError(RuntimeError):
    """The server failed to start, or its HTTP API answered with an error."""


def find_binary() -> Path | None:
    """The prometheus binary to use, or None if there is none.

    Looks at ``$FLINKWATCH_STACK_DIR/prometheus/bin/prometheus``, then
    ``<repo>/.stack/prometheus/bin/prometheus``, then ``prometheus`` on ``PATH``.
    """
    candidates = []
    stack = os.environ.get("FLINKWATCH_STACK_DIR")
    if stack:
        candidates.append(Path(stack) / "prometheus" / "bin" / "prometheus")
    candidates.append(REPO / ".stack" / "prometheus" / "bin" / "prometheus")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("prometheus")
    return Path(found) if found else None


def _terminate(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_ready(
    proc: subprocess.Popen[bytes], url: str, timeout: float, name: str, tail: Any
) -> None:
    """Poll ``url`` until it answers 200; fail with the log's tail if ``proc`` exits first."""
    deadline = time.monotonic() + timeout
    while True:
        code = proc.poll()
        if code is not None:
            raise PrometheusError(
                f"{name} exited with code {code} before it was ready; log:\n{tail()}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass  # not listening yet, or 503 while starting
        if time.monotonic() > deadline:
            raise PrometheusError(f"{name} not ready at {url} within {timeout:.0f} s:\n{tail()}")
        time.sleep(0.1)


def _duration(seconds: float) -> str:
    """A Prometheus duration string: ``1s``, ``250ms``."""
    ms = round(seconds * 1000)
    if ms <= 0:
        raise ValueError(f"interval must be positive, got {seconds!r}")
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


class PrometheusServer:
    """One Prometheus process scraping ``targets`` (``host:port``) as job ``flinkwatch``.

    Everything it writes (config, TSDB, log) lives under ``workdir``. Use as a context
    manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        targets: list[str],
        scrape_interval_s: float = 1.0,
        rule_files: list[Path] | None = None,
        evaluation_interval_s: float = 1.0,
        alertmanagers: list[str] | None = None,
        extra_scrape_configs: list[dict[str, Any]] | None = None,
    ) -> None:
        self.binary = Path(binary)
        self.alertmanagers = list(alertmanagers or [])
        #: More jobs after ``flinkwatch`` (their own scheme, tls_config, basic_auth, ...).
        self.extra_scrape_configs = list(extra_scrape_configs or [])
        self.workdir = Path(workdir)
        self.scrape_targets = list(targets)
        self.scrape_interval_s = scrape_interval_s
        self.rule_files = [Path(p).resolve() for p in rule_files or []]
        self.evaluation_interval_s = evaluation_interval_s
        self.config_path = self.workdir / "prometheus.yml"
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "prometheus.log"
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    # --- lifecycle -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL of the running server, e.g. ``http://127.0.0.1:40123``."""
        if self.port is None:
            raise PrometheusError("Prometheus is not started")
        return f"http://127.0.0.1:{self.port}"

    def write_config(self) -> Path:
        """Write ``prometheus.yml`` (as JSON, which is valid YAML) and return its path."""
        config: dict[str, Any] = {
            "global": {
                "scrape_interval": _duration(self.scrape_interval_s),
                "scrape_timeout": _duration(min(self.scrape_interval_s, 10.0)),
                "evaluation_interval": _duration(self.evaluation_interval_s),
            },
            "rule_files": [str(p) for p in self.rule_files],
            "scrape_configs": [
                {"job_name": JOB_NAME, "static_configs": [{"targets": self.scrape_targets}]},
                *self.extra_scrape_configs,
            ],
        }
        if self.alertmanagers:
            config["alerting"] = {
                "alertmanagers": [{"static_configs": [{"targets": self.alertmanagers}]}]
            }
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(config, indent=2) + "\n")
        return self.config_path

    def start(self, timeout: float = 60.0) -> Self:
        """Write the config, start the server on a free port and wait for ``/-/ready``."""
        if self._proc is not None:
            raise PrometheusError("Prometheus is already started")
        self.write_config()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self._log = self.log_path.open("ab")
        self._proc = subprocess.Popen(
            [
                str(self.binary),
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.data_dir}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                "--log.level=warn",
            ],
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        assert self._proc is not None
        _wait_ready(self._proc, f"{self.url}/-/ready", timeout, "prometheus", self.log_tail)

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s). Safe to call twice."""
        proc, self._proc = self._proc, None
        _terminate(proc)
        if self._log is not None:
            self._log.close()
            self._log = None

    def reload(self) -> None:
        """Re-read the config and rule files (``POST /-/reload``)."""
        req = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        with urllib.request.urlopen(req, timeout=10):
            pass

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- HTTP API --------------------------------------------------------------------

    def api(self, path: str, params: dict[str, str] | None = None) -> Any:
        """GET ``/api/v1/<path>`` and return its ``data``; raise unless status is success."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as e:  # 4xx/5xx still carry a JSON error body
            try:
                body = json.load(e)
            except ValueError:
                raise PrometheusError(f"GET {url}: HTTP {e.code}") from e
        if body.get("status") != "success":
            raise PrometheusError(
                f"GET {url}: {body.get('errorType', 'error')}: {body.get('error', body)}"
            )
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """Evaluate an instant query; the ``data.result`` list (``metric``/``value`` dicts).

        ``at`` (Unix seconds) is the evaluation time; Prometheus's own "now" when omitted.
        """
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self.api("query", params)
        if data["resultType"] in ("scalar", "string"):  # result is a bare [time, value]
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets (``labels``, ``health``, ``lastError``, ...)."""
        return list(self.api("targets", {"state": "active"})["activeTargets"])

    def alerts(self) -> list[dict[str, Any]]:
        """Pending and firing alerts (``labels``, ``state``, ``activeAt``, ``value``)."""
        return list(self.api("alerts")["alerts"])

    def wait_for(
        self, expr: str, timeout: float = 60.0, interval: float = 0.25
    ) -> list[dict[str, Any]]:
        """Poll ``expr`` until it returns a non-empty result and return that result."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if result:
                return result
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"query {expr!r} still empty after {timeout:.0f} s; "
                    f"targets: {json.dumps(self.targets())}"
                )
            if not self.running:
                raise PrometheusError(f"prometheus exited; log:\n{self.log_tail()}")
            time.sleep(interval)


class AlertmanagerServer:
    """One Alertmanager (Debian's binary) that routes every alert to a Slack webhook.

    Routing keeps Alertmanager's defaults (group_wait 30 s, group_interval 5 m,
    repeat_interval 4 h), grouped by alert name and Flink job; the Slack text lists each
    alert's name and ids so a receiver can tell which job it is about.
    """

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        slack_url: str,
        channel: str,
        group_wait_s: float | None = None,
        send_resolved: bool = False,
    ) -> None:
        self.binary = Path(binary)
        #: Also page when an alert resolves (Alertmanager's Slack default: no).
        self.send_resolved = send_resolved
        self.workdir = Path(workdir)
        self.slack_url = slack_url
        self.channel = channel
        #: None keeps Alertmanager's default (30 s); tests shorten it.
        self.group_wait_s = group_wait_s
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def target(self) -> str:
        """``host:port`` for Prometheus' ``alerting`` section."""
        if self.port is None:
            raise PrometheusError("Alertmanager is not started")
        return f"127.0.0.1:{self.port}"

    def write_config(self) -> Path:
        """The routing tree and the Slack receiver (JSON is valid YAML)."""
        text = (
            "{{ range .Alerts }}{{ .Labels.alertname }} job_id={{ .Labels.job_id }} "
            "tm_id={{ .Labels.tm_id }}\n{{ end }}"
        )
        route: dict[str, Any] = {"receiver": "slack", "group_by": ["alertname", "job_id"]}
        if self.group_wait_s is not None:
            # 0s is Alertmanager's "notify at once"; a scrape interval cannot be zero.
            route["group_wait"] = "0s" if self.group_wait_s == 0 else _duration(self.group_wait_s)
        config = {
            "route": route,
            "receivers": [
                {
                    "name": "slack",
                    "slack_configs": [
                        {
                            "api_url": self.slack_url,
                            "channel": self.channel,
                            "text": text,
                            "send_resolved": self.send_resolved,
                        }
                    ],
                }
            ],
        }
        self.workdir.mkdir(parents=True, exist_ok=True)
        path = self.workdir / "alertmanager.yml"
        path.write_text(json.dumps(config, indent=2) + "\n")
        return path

    def start(self, timeout: float = 60.0, port: int | None = None) -> Self:
        """Start on ``port`` (default: a free one) of 127.0.0.1, no clustering; wait for ready.

        A given port lets a test point a client at an Alertmanager that is not up yet.
        """
        config = self.write_config()
        self.port = port or free_port()
        self._log = (self.workdir / "alertmanager.log").open("ab")
        self._proc = subprocess.Popen(
            [
                str(self.binary),
                f"--config.file={config}",
                f"--storage.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_ready(
                self._proc, f"http://{self.target}/-/ready", timeout, "alertmanager", self._tail
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _tail(self) -> str:
        try:
            return (self.workdir / "alertmanager.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Terminate the process. Safe to call twice."""
        proc, self._proc = self._proc, None
        _terminate(proc)
        if self._log is not None:
            self._log.close()
            self._log = None
