"""What every command shares (``streaming/cli/args.py``): its config and overrides, its output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_the_spark_ui_is_on_by_default_and_no_spark_ui_turns_it_off() -> None:
    from conf import AppConfig
    from streaming.cli import build_parser
    from streaming.cli.args import base_overrides, with_overrides

    assert AppConfig().spark.ui_port == 4040
    args = build_parser().parse_args(["run", "--no-spark-ui"])
    assert with_overrides(AppConfig(), base_overrides(args)).spark.ui_port is None
    args = build_parser().parse_args(["run"])
    assert with_overrides(AppConfig(), base_overrides(args)).spark.ui_port == 4040


def test_overrides_replace_only_the_fields_given_and_the_rest_stays() -> None:
    import argparse

    from conf import AppConfig
    from streaming.cli.args import base_overrides, with_overrides

    args = argparse.Namespace(bootstrap="kafka-1:9092", state_dir="/var/lib/fw", no_spark_ui=False)
    assert base_overrides(args) == {
        "kafka": {"bootstrap_servers": "kafka-1:9092"},
        "output": {"state_dir": Path("/var/lib/fw")},
    }
    cfg = with_overrides(AppConfig(), base_overrides(args))
    assert cfg.kafka.bootstrap_servers == "kafka-1:9092"
    assert cfg.output.state_dir == Path("/var/lib/fw")
    assert cfg.kafka.logs_topic == AppConfig().kafka.logs_topic
    # A command without these options overrides nothing.
    assert base_overrides(argparse.Namespace()) == {}


def test_a_bad_config_file_exits_2_naming_the_field(tmp_path, caplog) -> None:
    from streaming.cli.args import load_or_exit

    bad = tmp_path / "bad.yaml"
    bad.write_text("detectors:\n  checkpoint_failures:\n    min_expired: -1\n")
    with pytest.raises(SystemExit) as exit_:
        load_or_exit(str(bad))
    assert exit_.value.code == 2
    assert "detectors.checkpoint_failures.min_expired" in caplog.text
    assert load_or_exit(None).kafka == load_or_exit("conf/flinkwatch.yaml").kafka


def test_json_output_is_one_indented_document(capsys) -> None:
    from streaming.cli.args import print_json

    print_json({"ok": True, "fields": ["a.b"]})
    out = capsys.readouterr().out
    assert json.loads(out) == {"ok": True, "fields": ["a.b"]}
    assert out.endswith("}\n") and "\n  " in out


def test_ctrl_c_inside_a_jvm_call_logs_no_traceback_and_other_errors_still_do(caplog) -> None:
    import logging

    from streaming.cli.args import PY4J_INTERRUPT, setup_logging

    setup_logging(verbose=False)
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        logging.exception(PY4J_INTERRUPT)  # as py4j's send_command does, on the root logger
    try:
        raise RuntimeError("the JVM went away")
    except RuntimeError:
        logging.exception("Exception while sending command.")
    assert PY4J_INTERRUPT not in caplog.text
    assert "Exception while sending command." in caplog.text and "the JVM went away" in caplog.text
