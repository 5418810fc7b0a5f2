"""What the config's tests share."""

from __future__ import annotations

from pathlib import Path


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
