"""The tests mirror the tree: every product module has its test file at the mirrored path."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The packages whose modules are tested one by one (bench/ and scripts/ are run, not unit tested).
PACKAGES = ("detectors", "conf", "sinks", "streaming", "lab")


def mirrored(module: Path) -> Path:
    """``sinks/ledger/store.py`` -> ``tests/sinks/ledger/test_store.py`` (``__main__``: ``test_main``)."""
    name = "main" if module.stem == "__main__" else module.stem
    return REPO / "tests" / module.parent.relative_to(REPO) / f"test_{name}.py"


def test_every_product_module_has_a_test_file_at_its_mirrored_path() -> None:
    modules = [
        m
        for package in PACKAGES
        for m in sorted((REPO / package).rglob("*.py"))
        if m.name != "__init__.py" and "__pycache__" not in m.parts
    ]
    assert len(modules) > 100
    missing = [str(m.relative_to(REPO)) for m in modules if not mirrored(m).is_file()]
    assert missing == []
