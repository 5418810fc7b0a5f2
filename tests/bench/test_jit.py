"""``python -m bench.jit``'s config: ``--setting`` reaches the config's spark section."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.jit import parser, run_config
from conf import ConfigError, load_config


def _config(tmp_path: Path, *argv: str) -> str:
    args = parser().parse_args(["--name", "t", *argv])
    return run_config(args, "127.0.0.1:9092", "t", tmp_path, "-Xss16m", 4040, {})


def test_a_setting_is_a_key_of_the_spark_section_read_as_yaml(tmp_path: Path) -> None:
    text = _config(
        tmp_path,
        "--setting",
        "realtime_batch_s=15",
        "--setting",
        "deadline_grace_s=null",
        "--spark",
        "spark.sql.shuffle.partitions=3",
    )
    spark = load_config(tmp_path / "flinkwatch.yaml", text=text).spark
    assert spark.realtime_batch_s == 15
    assert spark.deadline_grace_s is None
    assert spark.trigger_interval_s == 1  # the default, where no setting says otherwise
    assert spark.ui_port == 4040
    assert spark.options["spark.sql.shuffle.partitions"] == "3"


def test_a_setting_the_config_refuses_is_named_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="realtime_batch"):
        _config(tmp_path, "--setting", "realtime_batch=30")
    with pytest.raises(ConfigError, match="realtime_batch_s"):
        _config(tmp_path, "--setting", "realtime_batch_s=1")  # below its minimum of 5
