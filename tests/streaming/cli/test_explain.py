"""``flinkwatch explain``: over a replay of a real run, and asking a running job's endpoint."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from conf import AppConfig
from sinks.inbound.metrics_server import BasicAuth, MetricsEndpoint, MetricsServer
from streaming.cli import main
from streaming.entity import Header, saved_text
from streaming.explain import Asked, Explanation, explain, render

REAL = Path(__file__).resolve().parents[2] / "data" / "real" / "expiry_2_3"
JOB = "3631d292e50708eb38e1304df762587a"
NAME = "insert-into_default_catalog.default_database.sink"
USER, PASSWORD = "prometheus", "s3cret"


@pytest.mark.spark
def test_explain_over_a_replay_of_a_real_run_prints_every_job_detector(
    spark, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "explain",
            "--job",
            NAME,
            "--logs",
            str(REAL / "expiry_2_3.log"),
            "--metrics",
            str(REAL / "expiry_2_3.jsonl"),
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert out[0].startswith(f"job:{JOB} ({NAME}), newest event 2026-")
    by = {line.split()[0]: line.split(maxsplit=2)[1:] for line in out[1:]}
    assert sorted(by) == [
        "checkpoint_creep",
        "checkpoint_failures",
        "checkpoint_state_growth",
        "job_lost",
        "late_barrier_acks",
        "new_error_pattern",
        "restart_storm",
    ]
    # The run's checkpoints expire: the replay pages checkpoint_failures (expected.json).
    assert by["checkpoint_failures"][0] == "FIRING"
    # job_lost reads the job's state lines and its JobManager's: the run has none it keeps.
    assert by["job_lost"][0] == "-"
    assert all(len(words) > 1 and words[1] for words in by.values())


def test_explain_needs_one_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--cluster"]) == 2
    assert main(["explain", "--cluster", "--url", "http://x", "--logs", "a.log"]) == 2


def test_explain_asks_for_one_entity() -> None:
    with pytest.raises(SystemExit):
        main(["explain", "--job", "x", "--tm", "y", "--url", "http://x"])


# --- the running job ---------------------------------------------------------------------------


def answer() -> dict[str, object]:
    """What a running job's endpoint answers (the model's own JSON)."""
    saved = {f"job:{JOB}": saved_text(Header(name=NAME, newest_ms=60_000), {})}
    return explain(Asked(job=NAME), saved, AppConfig()).model_dump(mode="json")


class Endpoint:
    """A running job's metrics endpoint with basic auth, answering ``/explain``."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, query: str) -> tuple[int, object]:
        self.asked.append(query)
        if "nobody" in query:
            return 503, {"error": "the detect query's state cannot be read: no batch yet"}
        return 200, answer()


@pytest.fixture
def job_endpoint() -> Iterator[tuple[MetricsServer, Endpoint]]:
    endpoint = Endpoint()
    server = MetricsEndpoint("127.0.0.1", 0, auth=BasicAuth(USER, PASSWORD)).serve(
        CollectorRegistry(), explainer=endpoint
    )
    yield server, endpoint
    server.close()


@pytest.fixture
def scrape_config(tmp_path: Path) -> Path:
    path = tmp_path / "flinkwatch.yaml"
    path.write_text(
        f"metrics:\n  basic_auth_username: {USER}\n  basic_auth_password_env: FW_TEST_SCRAPE\n"
    )
    return path


def test_explain_asks_the_running_job_with_a_scrapes_credentials(
    job_endpoint: tuple[MetricsServer, Endpoint],
    scrape_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server, endpoint = job_endpoint
    monkeypatch.setenv("FW_TEST_SCRAPE", PASSWORD)
    # The scrape's own URL works too: /metrics is cut.
    args = ["explain", "--job", NAME, "--url", server.url, "--config", str(scrape_config)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert endpoint.asked == [f"job={NAME}"]
    assert text.strip() == render(Explanation.model_validate(answer()))
    assert main([*args, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == answer()


def test_explain_without_the_password_says_which_variable(
    job_endpoint: tuple[MetricsServer, Endpoint],
    scrape_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, endpoint = job_endpoint
    monkeypatch.delenv("FW_TEST_SCRAPE", raising=False)
    with caplog.at_level(logging.ERROR):
        rc = main(["explain", "--cluster", "--url", server.url, "--config", str(scrape_config)])
    assert rc == 1
    assert "$FW_TEST_SCRAPE is empty" in caplog.text
    assert endpoint.asked == []


@pytest.mark.parametrize(
    ("password", "question", "said"),
    [
        ("wrong", ["--cluster"], "401 Unauthorized"),
        (PASSWORD, ["--job", "nobody"], "503 Service Unavailable: the detect query's state cannot"),
    ],
    ids=["wrong_password", "state_unreadable"],
)
def test_a_refusal_of_the_endpoint_is_an_error_saying_it(
    job_endpoint: tuple[MetricsServer, Endpoint],
    scrape_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    password: str,
    question: list[str],
    said: str,
) -> None:
    server, _endpoint = job_endpoint
    monkeypatch.setenv("FW_TEST_SCRAPE", password)
    with caplog.at_level(logging.ERROR):
        rc = main(["explain", *question, "--url", server.url, "--config", str(scrape_config)])
    assert rc == 1
    assert said in caplog.text
    assert caplog.text.count(said.split(":")[0]) == 1  # the status said once
    assert password not in caplog.text or password == PASSWORD


def test_a_url_that_is_not_http_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert main(["explain", "--cluster", "--url", "file:///etc/passwd"]) == 1
    assert "not an http(s) URL" in caplog.text
