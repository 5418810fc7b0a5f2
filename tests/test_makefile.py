"""The Makefile's targets run what a newcomer's first run needs, in that order.

``make -n -B`` prints every command a target would run, and runs none.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _commands(target: str) -> list[str]:
    done = subprocess.run(
        ["make", "-n", "-B", "-C", str(REPO), "--no-print-directory", target],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.splitlines()


def _first(commands: list[str], word: str) -> int:
    return next(i for i, c in enumerate(commands) if word in c)


def test_setup_checks_the_prerequisites_before_installing_anything() -> None:
    commands = _commands("setup")
    assert "scripts/prereqs.sh" in commands[0]
    assert _first(commands, "scripts/venv.sh ensure") < _first(commands, "pip install")
    assert not any("-m venv" in c for c in commands)  # only through venv.sh, which checks pip


def test_only_the_targets_that_run_prometheus_fetch_it() -> None:
    # Debian packages, and templates written under /usr/share: not for a demo that uses none.
    for target in ("setup", "demo", "up", "lint"):
        assert not any("prometheus.sh" in c for c in _commands(target)), target
    for target in ("test", "unit", "bench"):
        commands = _commands(target)
        fetch = _first(commands, "scripts/prometheus.sh fetch")
        assert fetch < _first(commands, "pytest" if target != "bench" else "bench.run"), target


def test_only_make_test_fetches_the_hdfs_and_s3_servers() -> None:
    # 117 MB of test servers: not for a demo or a lint.
    for target in ("setup", "demo", "up", "lint", "unit"):
        assert not any("fetch-servers" in c for c in _commands(target)), target
    commands = _commands("test")
    assert _first(commands, "scripts/stack.sh fetch-servers") < _first(commands, "pytest")


def test_ci_runs_make_test() -> None:
    run = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert run[-1] == "make test"
