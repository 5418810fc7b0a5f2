"""The README and docs/ stay navigable and true: links resolve, the guide's code runs."""

from __future__ import annotations

import importlib.util
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
    guide = (REPO / "docs" / "adding-a-detector.md").read_text(encoding="utf-8")
    detector, usage = re.findall(r"```python\n(.*?)```", guide, re.S)[:2]
    assert len(detector.splitlines()) < 80, "the guide's detector stays short"
    # A module of its own: pydantic resolves the models' annotations through it.
    module = types.ModuleType("decline_burst_guide")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(detector, "adding-a-detector.md", "exec"), module.__dict__)  # noqa: S102
    exec(compile(usage, "adding-a-detector.md", "exec"), module.__dict__)  # noqa: S102
    said = [line.removeprefix("# ") for line in usage.splitlines() if line.startswith("# ")]
    assert capsys.readouterr().out.splitlines() == said
    assert [a.status.value for a in module.alerts] == ["firing", "escalated", "resolved"]
    assert len({a.alert_id for a in module.alerts}) == 1  # one incident


def test_the_charts_page_shows_a_real_png_per_charted_detector_or_says_none_exercises_it() -> None:
    from sinks.charts import CHARTS

    page = (REPO / "docs" / "charts.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page)
    assert images, "docs/charts.md shows no chart"
    for target in images:
        data = (REPO / "docs" / target).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", target
    not_exercised = page.split("## Not exercised by a real run", 1)[1].split("\n## ", 1)[0]
    for detector in CHARTS:
        shown = f"images/{detector}.png" in images
        listed = f"- `{detector}`:" in not_exercised
        assert shown != listed, detector  # one or the other, never both
    # Each image comes from the real run the page names, which the script renders it from.
    spec = importlib.util.spec_from_file_location(
        "doc_charts", REPO / "scripts" / "render_doc_charts.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rendered = {name: run for run, names in script.SHOWN.items() for name in names}
    assert sorted(f"images/{name}.png" for name in rendered) == sorted(images)
    for target in images:
        section = page.split(f"]({target})", 1)[1].split("\n#", 1)[0]
        run = re.search(r"From `(\w+)`", section)
        assert run is not None, target
        name = target.removeprefix("images/").removesuffix(".png")
        assert rendered[name] == run.group(1) and (script.REAL / run.group(1)).is_dir()


def test_no_file_holds_a_merge_left_unresolved() -> None:
    # A conflict resolved in one file and not another once reached main in a doc.
    marker = re.compile(r"^(<{7}|>{7})( |$)|^={7}$", re.MULTILINE)
    # Not ours: the venvs (PyFlink's of the capture scripts too), the stack, run output.
    skip = {".git", ".venv", ".flink", ".stack", "var", "node_modules", ".work"}
    found = [
        str(p.relative_to(REPO))
        for p in REPO.rglob("*")
        if p.suffix in {".md", ".py", ".yaml", ".yml", ".toml", ".sh", ".json"}
        and p.is_file()
        and not skip & set(p.relative_to(REPO).parts)
        and marker.search(p.read_text(encoding="utf-8", errors="replace"))
    ]
    assert found == []
