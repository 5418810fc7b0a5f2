"""What every ``flinkwatch`` command shares: its log, its config, its output format.

The config is the file ``--config`` names with the command line's overrides. The
commands (the modules of :mod:`streaming.cli`) and the demo tooling's ``python -m lab``
import these (``run`` and ``replay`` also ``summary.py``, what both print at the end),
and nothing of each other.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from conf import AppConfig, ConfigError, load_config

log = logging.getLogger("flinkwatch")


def setup_logging(verbose: bool) -> None:
    """Log to stderr, one line a record; the Kafka client's and py4j's chatter held back."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)-5s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # py4j logs every JVM call at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    logging.getLogger().addFilter(_drop_py4j_interrupt)
    # kafka-python narrates every connection at INFO.
    logging.getLogger("kafka").setLevel(logging.WARNING)


#: What py4j logs, with a traceback, on the root logger when Ctrl-C (or ``replay
#: --watch``'s SIGTERM) interrupts a call to the JVM: the command says itself that it stops.
PY4J_INTERRUPT = "KeyboardInterrupt while sending command."


def _drop_py4j_interrupt(record: logging.LogRecord) -> bool:
    """Whether a root-logger record is kept: not py4j's :data:`PY4J_INTERRUPT`."""
    return record.msg != PY4J_INTERRUPT


def load_or_exit(path: str | None) -> AppConfig:
    """The config file (the packaged default for ``None``); exit 2 naming what is wrong."""
    try:
        return load_config(path)
    except ConfigError as exc:
        log.error("%s", exc)
        raise SystemExit(2) from exc


def base_overrides(args: argparse.Namespace) -> dict[str, dict[str, object]]:
    """Command-line overrides of config sections, re-applied on every reload."""
    out: dict[str, dict[str, object]] = {}
    if getattr(args, "bootstrap", None):
        out.setdefault("kafka", {})["bootstrap_servers"] = args.bootstrap
    if getattr(args, "state_dir", None):
        out.setdefault("output", {})["state_dir"] = Path(args.state_dir)
    if getattr(args, "no_spark_ui", False):
        out.setdefault("spark", {})["ui_port"] = None
    return out


def with_overrides(cfg: AppConfig, updates: dict[str, dict[str, object]]) -> AppConfig:
    """``cfg`` with some fields of some sections replaced (:func:`base_overrides`)."""
    return cfg.model_copy(
        update={sec: getattr(cfg, sec).model_copy(update=vals) for sec, vals in updates.items()}
    )


def config_of(args: argparse.Namespace) -> AppConfig:
    """The config a command's ``--config`` names, with its command-line overrides."""
    return with_overrides(load_or_exit(args.config), base_overrides(args))


def print_json(value: object) -> None:
    """One JSON document on stdout (``-o json``): what a script or ``jq`` reads."""
    print(json.dumps(value, indent=2))


def add_output_format(parser: argparse.ArgumentParser) -> None:
    """``-o text|json``: the same answer for a person or for a script."""
    parser.add_argument(
        "-o",
        "--output",
        dest="output_format",
        choices=["text", "json"],
        default="text",
        help="text for a person, json for a script (default: text)",
    )
