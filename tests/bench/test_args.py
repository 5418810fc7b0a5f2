"""The bench's ``KEY=VALUE`` arguments (``bench.key_value``)."""

from __future__ import annotations

import argparse

import pytest

from bench import key_value, yaml_setting


def test_a_setting_splits_at_its_first_equals_sign() -> None:
    assert key_value("spark.sql.codegen.factoryMode=NO_CODEGEN") == (
        "spark.sql.codegen.factoryMode",
        "NO_CODEGEN",
    )
    assert key_value("spark.driver.extraJavaOptions=-Da=b") == (
        "spark.driver.extraJavaOptions",
        "-Da=b",
    )
    assert key_value("spark.x=") == ("spark.x", "")


@pytest.mark.parametrize("text", ["NO_CODEGEN", "=1", " =1"])
def test_a_setting_without_a_key_is_refused_by_name(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=f"expected KEY=VALUE, got {text!r}"):
        key_value(text)


def test_a_config_setting_reads_its_value_as_yaml() -> None:
    assert yaml_setting("realtime_batch_s=30") == ("realtime_batch_s", 30)
    assert yaml_setting("deadline_grace_s=null") == ("deadline_grace_s", None)
    assert yaml_setting("parse_mode=microbatch") == ("parse_mode", "microbatch")
    with pytest.raises(argparse.ArgumentTypeError, match="expected KEY=VALUE"):
        yaml_setting("30")
