"""The bottom floor: ``detectors`` imports nothing above it, ``detectors.model`` nothing of ours."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import conf.errors
from detectors import REGISTRY, model

DETECTORS = Path(model.__file__).parent
ABOVE = {"conf", "sinks", "streaming", "lab", "bench", "tests", "scripts", "pyspark"}


def imported_modules(path: Path) -> set[str]:
    """Modules a module imports, at module level or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "detectors":
            # ``from detectors import words``: the submodule, not the package's registry.
            out |= {f"detectors.{a.name}" for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def imported_packages(path: Path) -> set[str]:
    """Top-level names a module imports."""
    return {m.split(".")[0] for m in imported_modules(path)}


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
    # ConfigError lives where the config does; detectors never raise it.
    assert issubclass(conf.errors.ConfigError, model.FlinkwatchError)
    assert not hasattr(model, "ConfigError")
    assert conf.errors.FlinkwatchError is model.FlinkwatchError


def test_a_detector_imports_the_shared_modules_never_another_detector() -> None:
    # Whatever two detectors share (a metric name, a statistic) lives in a shared module.
    shared = {
        "detectors.base",
        "detectors.model",
        "detectors.stats",
        "detectors.story",
        "detectors.drain",
        "detectors.words",
    }
    wrong = {
        f"{det.__module__} imports {m}"
        for det in REGISTRY.values()
        for m in imported_modules(DETECTORS / f"{det.__module__.split('.')[-1]}.py")
        if m.startswith("detectors") and m not in shared
    }
    assert not wrong
