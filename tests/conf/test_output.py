"""Where a run's state goes: the checkpoint location a path or a Hadoop URI."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from conf import AppConfig, OutputConfig
from conf.output import checkpoint_scheme


def test_a_checkpoint_location_is_a_path_or_a_hadoop_uri(tmp_path: Path) -> None:
    assert OutputConfig(state_dir=tmp_path).checkpoints == str(tmp_path / "checkpoints")
    assert OutputConfig(state_dir=tmp_path).checkpoint_dir == tmp_path / "checkpoints"
    assert OutputConfig(checkpoint_location="file:///ck").checkpoint_dir == Path("/ck")
    remote = OutputConfig(checkpoint_location="hdfs://nn:8020/fw/ck")
    assert remote.checkpoints == "hdfs://nn:8020/fw/ck"
    with pytest.raises(ValueError, match="not on a local disk"):
        _ = remote.checkpoint_dir
    with pytest.raises(ValidationError, match="use s3a://"):
        AppConfig.model_validate({"output": {"checkpoint_location": "s3://bucket/ck"}})


@pytest.mark.parametrize(
    ("location", "scheme"),
    [
        (None, None),
        ("/var/lib/flinkwatch/checkpoints", None),
        ("var/checkpoints", None),
        ("C:/flinkwatch/checkpoints", None),  # a drive letter is a path
        ("file:///ck", "file"),
        ("HDFS://nn:8020/ck", "hdfs"),
        ("s3a://bucket/ck", "s3a"),
    ],
)
def test_the_scheme_of_a_checkpoint_location(location: str | None, scheme: str | None) -> None:
    assert checkpoint_scheme(location) == scheme


def test_the_files_of_a_run_are_in_its_state_dir_unless_named(tmp_path: Path) -> None:
    out = OutputConfig(state_dir=tmp_path)
    assert out.alerts_path == tmp_path / "alerts.jsonl"
    assert out.ledger_path == tmp_path / "ledger.sqlite"
    assert out.silences_path == tmp_path / "silences.sqlite"
    assert OutputConfig(alerts_file=tmp_path / "a.jsonl").alerts_path == tmp_path / "a.jsonl"
