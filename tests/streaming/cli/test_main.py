"""``python -m streaming.cli`` (``streaming/cli/__main__.py``): the command from a checkout."""

from __future__ import annotations

import subprocess

from tests.conftest import python_m


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return python_m("streaming.cli", *args)


def test_python_m_streaming_cli_lists_the_commands_and_exits_zero() -> None:
    done = cli("--help")
    assert done.returncode == 0, done.stderr
    for command in ("run", "replay", "parse", "config", "deliveries", "silence", "doctor"):
        assert command in done.stdout


def test_its_exit_status_is_the_commands(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("detectors:\n  checkpoint_failures:\n    min_expired: -1\n")
    assert cli("config", "check", "conf/flinkwatch.yaml").returncode == 0
    done = cli("config", "check", str(bad))
    assert done.returncode == 1
    assert "detectors.checkpoint_failures.min_expired" in done.stderr
    assert cli("no-such-command").returncode == 2
