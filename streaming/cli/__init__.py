"""``flinkwatch`` command line: run, replay, parse; config, kafka, deliveries.

The demo tooling (simulated fleet, local Slack) has its own: ``python -m lab``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from streaming.cli.args import setup_logging


@dataclass(frozen=True)
class Command:
    """One ``flinkwatch`` command: the module that carries it out, and its one-line help.

    The module is imported only when the command runs (or its ``--help`` is asked for),
    so each imports what it needs at its top: ``flinkwatch --help`` and ``config check``
    start no Spark and import no pyspark. The module gives ``add_arguments(parser)``,
    which adds the command's options (and subcommands) and sets ``func``.
    """

    module: str
    help: str


#: Every command, in the order ``flinkwatch --help`` lists them (as pip's ``commands_dict``).
COMMANDS: dict[str, Command] = {
    "run": Command("streaming.cli.run", "run the streaming job against Kafka"),
    "replay": Command("streaming.cli.replay", "run the detectors over log/metric files"),
    "explain": Command(
        "streaming.cli.explain",
        "where each detector stands for a job, TaskManager or the cluster, and why",
    ),
    "parse": Command("streaming.cli.parse", "show how records parse (one JSON object per record)"),
    "config": Command("streaming.cli.config", "configuration tools"),
    "kafka": Command("streaming.cli.kafka", "Kafka tools"),
    "deliveries": Command(
        "streaming.cli.deliveries", "list alert deliveries; send failed ones again"
    ),
    "silence": Command("streaming.cli.silence", "add, list and expire silences (as amtool's)"),
    "report": Command(
        "streaming.cli.report",
        "incidents, time to resolve and false alarms over a window, as JSON and HTML",
    ),
    "doctor": Command(
        "streaming.cli.doctor", "read a sample of the input and say what it lets each detector see"
    ),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser (also used by the CLI tests).

    Args:
        only: fill in this command's options alone (importing only its module); the
            others are listed with their help. ``None``: every command's, as the tests
            walk them.
    """
    p = argparse.ArgumentParser(prog="flinkwatch", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.add_argument(
        "--version", action="version", version=f"%(prog)s {version()}", help="print the version"
    )
    sub = p.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        parser = sub.add_parser(name, help=command.help)
        if only is None or name == only:
            importlib.import_module(command.module).add_arguments(parser)
    return p


def _command_in(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option.

    The top-level options (``-v``, ``--version``, ``-h``) take no value, so the first
    other word is the command (or a word argparse will refuse as one).
    """
    return next((a for a in argv if not a.startswith("-")), None)


def version() -> str:
    """The installed flinkwatch's version; from a source tree not installed, pyproject's.

    A checkout run as ``python -m streaming.cli`` has no distribution metadata: the
    version in the ``pyproject.toml`` beside the code is then the truth, marked as such,
    and ``unknown`` when neither exists (a copied file, say).
    """
    try:
        return metadata.version("flinkwatch")
    except metadata.PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return "unknown (not installed)"
    if project.get("name") != "flinkwatch" or "version" not in project:
        return "unknown (not installed)"
    return f"{project['version']} (source tree, not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``flinkwatch`` console script."""
    words = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(only=_command_in(words) or "").parse_args(words)
    setup_logging(args.verbose)
    return int(args.func(args) or 0)
