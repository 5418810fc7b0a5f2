"""The README and docs/ stay navigable and true: links resolve, the guide's code runs."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_every_relative_link_in_the_docs_resolves() -> None:
    pages = [
        REPO / "README.md",
        REPO / "bench" / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
    ]
    broken = [
        f"{page.relative_to(REPO)} -> {target}"
        for page in pages
        for target in LINK.findall(page.read_text(encoding="utf-8"))
        if not target.startswith(("http://", "https://", "mailto:"))
        and not (page.parent / target).exists()
    ]
    assert broken == []


def test_the_readme_fits_on_a_screen_and_links_the_reference() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 300
    for page in ("configuration", "guarantees", "metrics", "deployment", "input-formats"):
        assert f"(docs/{page}.md)" in readme, page


def test_the_adding_a_detector_guide_runs_and_prints_what_it_says(monkeypatch, capsys) -> None:
    guide = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    section = guide[guide.index("## Adding a detector") :]
    detector, usage = re.findall(r"```python\n(.*?)```", section, re.S)[:2]
    assert len(detector.splitlines()) < 80, "the guide's detector stays short"
    # A module of its own: pydantic resolves the models' annotations through it.
    module = types.ModuleType("decline_burst_guide")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(detector, "development.md", "exec"), module.__dict__)  # noqa: S102
    exec(compile(usage, "development.md", "exec"), module.__dict__)  # noqa: S102
    said = [line.removeprefix("# ") for line in usage.splitlines() if line.startswith("# ")]
    assert capsys.readouterr().out.splitlines() == said
    assert [a.status.value for a in module.alerts] == ["firing", "resolved"]
    assert module.alerts[0].alert_id == module.alerts[1].alert_id
