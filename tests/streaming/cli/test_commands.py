"""The command table (``streaming/cli/__init__.py``): every command, its options' help, the version."""

from __future__ import annotations

import pytest

from streaming.cli import main
from tests.conftest import REPO


def test_every_option_of_every_command_says_what_it_does() -> None:
    import argparse

    from streaming.cli import build_parser

    def walk(parser: argparse.ArgumentParser, path: str) -> list[str]:
        missing = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    missing += walk(sub, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
        return missing

    assert walk(build_parser(), "flinkwatch") == []
    from lab.cli import build_parser as lab_parser

    assert walk(lab_parser(), "python -m lab") == []


def test_the_product_cli_does_not_carry_the_demo_tooling() -> None:
    # `flinkwatch` is the product; the simulator and the local Slack are `python -m lab`.
    import argparse
    import subprocess
    import sys

    from streaming.cli import build_parser

    code = (
        "import sys, streaming.cli, streaming.app, sinks, conf; "
        "sys.exit(any(m == 'lab' or m.startswith('lab.') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert not {"simulate", "demo", "slack-emulator"} & set(sub.choices)


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["config", "check", "conf/flinkwatch.yaml"], ["deliveries", "--help"]],
    ids=["help", "config-check", "deliveries-help"],
)
def test_commands_that_need_no_spark_do_not_import_it(argv: list[str]) -> None:
    # The command table imports a command's module only when that command runs.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from streaming.cli import main\n"
        "try:\n"
        f"    rc = main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    rc = exc.code\n"
        "spark = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))\n"
        "sys.exit(3 if spark else rc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_every_command_in_the_table_has_its_module() -> None:
    import importlib

    from streaming.cli import COMMANDS, build_parser

    for name, command in COMMANDS.items():
        assert callable(importlib.import_module(command.module).add_arguments), name
    # One command's options alone: the others are listed, with no options of their own.
    sub = next(a for a in build_parser(only="config")._actions if a.dest == "command")
    assert sub.choices["config"]._subparsers is not None
    assert sub.choices["run"]._actions[1:] == []


def test_version_prints_the_installed_distributions_version(monkeypatch, capsys) -> None:
    from importlib import metadata

    monkeypatch.setattr(metadata, "version", lambda name: {"flinkwatch": "9.8.7"}[name])
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == "flinkwatch 9.8.7"


def test_version_outside_an_install_says_the_source_trees_version(monkeypatch, capsys) -> None:
    import tomllib
    from importlib import metadata

    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    with pytest.raises(SystemExit):
        main(["--version"])
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    expected = f"flinkwatch {pyproject['project']['version']} (source tree, not installed)"
    assert capsys.readouterr().out.strip() == expected
