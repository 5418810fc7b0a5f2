"""The bottom floor: ``detectors`` imports nothing above it, ``detectors.model`` nothing of ours."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import conf.errors
from detectors import model

DETECTORS = Path(model.__file__).parent
ABOVE = {"conf", "sinks", "streaming", "lab", "bench", "tests", "scripts", "pyspark"}


def imported_packages(path: Path) -> set[str]:
    """Top-level names a module imports, at module level or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_no_detector_module_imports_a_floor_above_or_spark() -> None:
    wrong = {
        f"{p.name} imports {pkg}"
        for p in sorted(DETECTORS.glob("*.py"))
        for pkg in imported_packages(p) & ABOVE
    }
    assert not wrong


def test_the_model_imports_only_the_standard_library_and_pydantic() -> None:
    allowed = set(sys.stdlib_module_names) | {"__future__", "pydantic"}
    assert imported_packages(DETECTORS / "model.py") <= allowed


def test_conf_errors_are_the_models_classes() -> None:
    # Callers that import the errors from conf catch the very classes detectors raise.
    assert conf.errors.StateError is model.StateError
    assert conf.errors.ConfigError is model.ConfigError
    assert conf.errors.FlinkwatchError is model.FlinkwatchError
