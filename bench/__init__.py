"""The benchmark and its measuring tools (``bench/README.md``)."""

from __future__ import annotations

import argparse


def key_value(text: str) -> tuple[str, str]:
    """An argument's ``KEY=VALUE`` (``--spark``, ``--conf``): a missing ``=`` or key is named."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        msg = f"expected KEY=VALUE, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return key.strip(), value
