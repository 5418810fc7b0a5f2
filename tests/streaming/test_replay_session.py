"""The session of a command over files: what it imports while the JVM starts."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from streaming.replay_session import imported_meanwhile


def test_the_modules_are_imported_beside_the_block_and_by_its_end(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The block (the JVM's start) holds its thread until the module's import has begun
    # in another: the two run at once, and the import is whole when the block ends.
    begun = threading.Event()
    monkeypatch.setattr(sys.modules[__name__], "BEGUN", begun, raising=False)
    (tmp_path / "fw_meanwhile_a.py").write_text(
        f"import sys\nsys.modules[{__name__!r}].BEGUN.set()\nDONE = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fw_meanwhile_a", raising=False)
    with imported_meanwhile(["fw_meanwhile_a"]):
        assert begun.wait(timeout=60)
    assert sys.modules["fw_meanwhile_a"].DONE
    monkeypatch.delitem(sys.modules, "fw_meanwhile_a")


def test_a_failing_import_is_left_for_the_callers_own_import(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "fw_meanwhile_bad.py").write_text("raise ImportError('no such thing here')\n")
    (tmp_path / "fw_meanwhile_after.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with imported_meanwhile(["fw_meanwhile_bad", "fw_meanwhile_after"]):
        pass
    # The list stops at the failure: what follows it is the caller's to import too.
    assert "fw_meanwhile_bad" not in sys.modules
    assert "fw_meanwhile_after" not in sys.modules
    with pytest.raises(ImportError, match="no such thing here"):
        import fw_meanwhile_bad  # noqa: F401


def test_the_blocks_own_error_comes_out_once_the_imports_end(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "fw_meanwhile_c.py").write_text("C = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="the JVM did not start"):
        with imported_meanwhile(["fw_meanwhile_c"]):
            raise RuntimeError("the JVM did not start")
    assert sys.modules.pop("fw_meanwhile_c").C == 3
