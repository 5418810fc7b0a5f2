"""The README and docs/ stay navigable: every relative link points at a file that exists."""

from __future__ import annotations

import re
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
