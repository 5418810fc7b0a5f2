"""``scripts/venv.sh``: a venv whose pip does not run is rebuilt, not used."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "venv.sh"


def _venv(*args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": python}
    return subprocess.run(
        [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def _half_made(path: Path) -> Path:
    """What ``python3 -m venv`` leaves on Debian without python3-venv: a python, no pip."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path


def _maker(tmp_path: Path) -> str:
    """An interpreter whose ``-m venv --clear DIR`` makes a venv with a pip that runs.

    It writes the venv by hand (a python that answers ``-m pip --version``) and notes
    the call, so rebuilding needs neither ensurepip nor a network.
    """
    maker = tmp_path / "maker" / "python3"
    maker.parent.mkdir()
    bash = shutil.which("bash")
    maker.write_text(
        f"#!{bash}\n"
        f'echo "$@" >> {tmp_path}/maker/calls\n'
        'dir=${@: -1}; rm -rf "$dir"; mkdir -p "$dir/bin"\n'
        f'printf \'#!{bash}\\n[ "$*" = "-m pip --version" ]\\n\' > "$dir/bin/python"\n'
        'chmod +x "$dir/bin/python"\n'
    )
    maker.chmod(0o755)
    return str(maker)


def test_check_finds_a_venv_without_pip(tmp_path) -> None:
    half = _half_made(tmp_path / ".venv")
    done = _venv("check", str(half))
    assert done.returncode == 1
    assert "its pip does not run" in done.stderr
    assert _venv("check", str(tmp_path / "none")).returncode == 1


def test_check_passes_a_venv_whose_pip_runs() -> None:
    # The interpreter running the tests is a venv's, with pip.
    venv = Path(sys.executable).parent.parent
    assert (venv / "pyvenv.cfg").is_file()
    done = _venv("check", str(venv))
    assert (done.returncode, done.stderr) == (0, "")


def test_ensure_rebuilds_a_half_made_venv_and_says_so_in_one_line(tmp_path) -> None:
    half = _half_made(tmp_path / ".venv")
    done = _venv("ensure", str(half), python=_maker(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"[setup] {half} is a half-made venv (its pip does not run): rebuilding it"
    ]
    assert (tmp_path / "maker" / "calls").read_text() == f"-m venv --clear {half}\n"
    assert _venv("check", str(half)).returncode == 0


def test_ensure_leaves_a_working_venv_alone(tmp_path) -> None:
    maker = _maker(tmp_path)
    assert _venv("ensure", str(tmp_path / ".venv"), python=maker).returncode == 0
    done = _venv("ensure", str(tmp_path / ".venv"), python=maker)
    assert (done.returncode, done.stderr) == (0, "")
    assert (tmp_path / "maker" / "calls").read_text().count("-m venv") == 1


def test_a_venv_that_cannot_be_made_is_removed_and_the_fix_named(tmp_path) -> None:
    failing = tmp_path / "python3"
    failing.write_text(f'#!{shutil.which("bash")}\nmkdir -p "${{@: -1}}/bin"; exit 1\n')
    failing.chmod(0o755)
    done = _venv("ensure", str(tmp_path / ".venv"), python=str(failing))
    assert done.returncode == 1
    assert "apt-get install python3-venv" in done.stderr
    assert not (tmp_path / ".venv").exists()  # the next run starts clean
