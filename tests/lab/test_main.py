"""``python -m lab`` (``lab/__main__.py``): the lab's command line as a process runs it."""

from __future__ import annotations

import subprocess

from tests.conftest import python_m


def lab(*args: str) -> subprocess.CompletedProcess[str]:
    return python_m("lab", *args)


def test_python_m_lab_lists_its_commands_and_exits_zero() -> None:
    done = lab("--help")
    assert done.returncode == 0, done.stderr
    for command in ("simulate", "demo", "slack-emulator"):
        assert command in done.stdout


def test_an_unknown_command_exits_with_the_parsers_usage_error() -> None:
    done = lab("no-such-command")
    assert done.returncode == 2
    assert "invalid choice: 'no-such-command'" in done.stderr
