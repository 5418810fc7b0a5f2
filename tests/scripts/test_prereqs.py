"""``scripts/prereqs.sh``: what a machine lacks is said at once, before any install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "prereqs.sh"


def _bin(tmp_path: Path, *tools: str) -> Path:
    """A PATH directory holding only ``tools`` (links to this machine's) and the shell."""
    d = tmp_path / "bin"
    d.mkdir()
    for tool in ("bash", "readlink", *tools):
        found = shutil.which(tool)
        assert found is not None, tool
        (d / tool).symlink_to(found)
    return d


def _fake(path: Path, script: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{shutil.which('bash')}\n{script}\n")
    path.chmod(0o755)
    return path


def _run(path: Path, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(path), "PYTHON": python, "HOME": os.environ.get("HOME", "/")}
    return subprocess.run(
        [str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_passes_on_a_machine_with_everything() -> None:
    # This machine: the interpreter running the tests, Java 17+ and Maven on PATH.
    done = _run(Path(os.environ["PATH"]))
    assert (done.returncode, done.stderr) == (0, "")


def test_missing_java_and_maven_are_named_together_with_their_fixes(tmp_path) -> None:
    done = _run(_bin(tmp_path))
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines == [
        "[prereqs] missing: Java 17 or later (java not found); "
        "fix: apt-get install openjdk-17-jdk-headless",
        "[prereqs] missing: Maven (mvn not found); fix: apt-get install maven",
        "[prereqs] 2 prerequisite(s) missing: install them, then run make again",
    ]


def test_an_old_java_is_missing_java_and_no_jvm_starts_to_tell(tmp_path) -> None:
    path = _bin(tmp_path)
    # The JDK's release file says the version; its java would fail the test if run.
    jdk = tmp_path / "jdk-11"
    (path / "java").symlink_to(_fake(jdk / "bin" / "java", "echo ran >&2; exit 99"))
    (jdk / "release").write_text('IMPLEMENTOR="Eclipse Adoptium"\nJAVA_VERSION="11.0.22"\n')
    _fake(path / "mvn", "exit 0")
    done = _run(path)
    assert done.returncode == 1
    assert "missing: Java 17 or later (java is 11); fix: apt-get install openjdk-17-jdk" in (
        done.stderr
    )
    assert "ran" not in done.stderr and "Maven" not in done.stderr


def test_a_python_without_ensurepip_asks_for_python3_venv(tmp_path) -> None:
    path = _bin(tmp_path)
    # Debian's python3 without python3-venv: it runs, ensurepip does not.
    python = _fake(
        tmp_path / "py" / "python3",
        'if [ "$1" = -m ]; then echo "No module named ensurepip" >&2; exit 1; fi; echo 3.11',
    )
    done = _run(path, str(python))
    assert "missing: Python's venv with ensurepip" in done.stderr
    assert "fix: apt-get install python3-venv" in done.stderr
    assert "3 prerequisite(s) missing" in done.stderr and done.returncode == 1


def test_an_old_python_is_named_with_its_version(tmp_path) -> None:
    python = _fake(tmp_path / "py" / "python3", "echo 3.9")
    done = _run(_bin(tmp_path), str(python))
    assert f"missing: Python 3.11 or later ({python} is 3.9)" in done.stderr
    assert "ensurepip" not in done.stderr  # one thing to fix about Python at a time


def test_a_java_runtime_without_javac_asks_for_the_jdk(tmp_path) -> None:
    # flinkwatch compiles its one Java class (streaming/jvm): a JRE alone is not enough.
    path = _bin(tmp_path, "java", "mvn")
    done = _run(path)
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (
        "[prereqs] missing: a JDK's javac and jar (only a Java runtime found); "
        "fix: apt-get install openjdk-17-jdk-headless"
    )
