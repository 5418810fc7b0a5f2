"""A Spark user's own configuration holds, and the Spark UI is there: real JVMs.

One process per case: a Spark session's settings are fixed when its JVM starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.procs import free_port_run
from tests.conftest import SHORT_JVM_ENV

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import json, logging, sys, urllib.request
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
from streaming.session import get_session
port = None if sys.argv[1] == "none" else int(sys.argv[1])
spark = get_session(require_kafka=False, ui_port=port, shuffle_partitions=2)
keys = ("spark.sql.shuffle.partitions", "spark.sql.ansi.enabled", "spark.ui.killEnabled")
out = {k: spark.conf.get(k) for k in keys}
out["ui"] = spark.sparkContext.uiWebUrl
if port is not None:
    with urllib.request.urlopen(out["ui"] + "/StreamingQuery/", timeout=60) as r:
        out["streaming_tab"] = r.status
print(json.dumps(out))
spark.stop()
"""


def _run(argv: list[str], env: dict[str, str]) -> tuple[dict, str]:
    proc = subprocess.run(
        argv,
        cwd=REPO,
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            **SHORT_JVM_ENV,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Under spark-submit the driver's log lines come out on stdout too, around the answer.
    (answer,) = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return json.loads(answer), proc.stdout + proc.stderr


@pytest.mark.spark
def test_spark_defaults_and_submit_args_win_except_what_detection_needs(tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(SCRIPT, encoding="utf-8")
    (tmp_path / "spark-defaults.conf").write_text(
        "spark.sql.shuffle.partitions 5\nspark.sql.ansi.enabled true\n", encoding="utf-8"
    )
    port = free_port_run(1)
    out, log = _run(
        [sys.executable, str(tmp_path / "script.py"), str(port)],
        {
            "SPARK_CONF_DIR": str(tmp_path),
            "PYSPARK_SUBMIT_ARGS": "--conf spark.sql.shuffle.partitions=6 pyspark-shell",
        },
    )
    assert out["spark.sql.shuffle.partitions"] == "6"  # the command line over the file
    assert out["spark.sql.ansi.enabled"] == "false"  # malformed input must not fail a query
    assert "spark.sql.ansi.enabled=true is not applied" in log
    assert "spark.sql.shuffle.partitions=6 (flinkwatch: 2)" in log
    # The UI is on where asked, read-only, with its Structured Streaming tab.
    assert out["ui"].endswith(f":{port}") and out["streaming_tab"] == 200
    assert out["spark.ui.killEnabled"] == "false"


@pytest.mark.spark
def test_spark_submit_conf_wins_over_flinkwatchs_setting(tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(SCRIPT, encoding="utf-8")
    submit = Path(sys.executable).parent / "spark-submit"
    out, log = _run(
        [
            str(submit),
            "--master",
            "local[2]",
            "--conf",
            "spark.sql.shuffle.partitions=7",
            str(tmp_path / "script.py"),
            "none",
        ],
        {"SPARK_CONF_DIR": str(tmp_path)},
    )
    assert out["spark.sql.shuffle.partitions"] == "7"
    assert out["ui"] is None  # no UI unless asked
    assert "spark.sql.shuffle.partitions=7 (flinkwatch: 2)" in log
