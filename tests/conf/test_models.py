"""Config loading: defaults, per-detector sections, errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from conf import DEFAULT_CONFIG, ConfigError, load_config
from detectors import REGISTRY


def test_packaged_default_is_valid_and_lists_every_detector() -> None:
    cfg = load_config(DEFAULT_CONFIG)
    assert set(cfg.detector_params()) == set(REGISTRY)
    assert cfg.kafka.logs_topic == "flink.logs"


def test_default_yaml_states_every_default_of_the_models(tmp_path: Path) -> None:
    # The YAML documents the defaults: an empty file must load to the very same config.
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_config(empty) == load_config(DEFAULT_CONFIG)


def test_unknown_parameter_names_file_and_field(tmp_path: Path) -> None:
    f = tmp_path / "typo.yaml"
    f.write_text("detectors:\n  checkpoint_failures:\n    min_expird: 4\n")
    with pytest.raises(ConfigError, match=r"typo\.yaml.*detectors.*min_expird"):
        load_config(f)


def test_out_of_range_threshold_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "zero_window.yaml"
    f.write_text("detectors:\n  checkpoint_failures:\n    window_s: 0\n")
    with pytest.raises(ConfigError, match="window_s"):
        load_config(f)


def test_unknown_detector_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "unknown_detector.yaml"
    f.write_text("detectors:\n  heap_magic: {}\n")
    with pytest.raises(ConfigError, match="heap_magic"):
        load_config(f)


def test_unknown_top_level_section_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "extra_section.yaml"
    f.write_text("kafkaa:\n  bootstrap_servers: x\n")
    with pytest.raises(ConfigError, match="kafkaa"):
        load_config(f)


def test_broken_yaml_and_missing_file_are_config_errors(tmp_path: Path) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("kafka: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(f)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.yaml")


def test_config_is_frozen() -> None:
    cfg = load_config(DEFAULT_CONFIG)
    with pytest.raises(Exception, match="frozen"):
        cfg.kafka.logs_topic = "x"  # type: ignore[misc]
