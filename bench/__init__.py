"""The benchmark and its measuring tools (``bench/README.md``)."""

from __future__ import annotations

import argparse
from typing import Any


def key_value(text: str) -> tuple[str, str]:
    """An argument's ``KEY=VALUE`` (``--spark``, ``--conf``): a missing ``=`` or key is named."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        msg = f"expected KEY=VALUE, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return key.strip(), value


def yaml_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of a config key (``--setting``, bench.run's ``--spark``): VALUE as YAML."""
    import yaml

    key, value = key_value(text)
    return key, yaml.safe_load(value)
