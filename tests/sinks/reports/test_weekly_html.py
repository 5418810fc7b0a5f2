"""``flinkwatch report``'s page (``sinks/reports/weekly_html.py``): one file, its charts inline."""

from __future__ import annotations

import base64
import io
import re

from PIL import Image

from sinks.reports.weekly import Report
from sinks.reports.weekly_html import render_html


def test_the_page_carries_its_charts_as_inline_pngs(week: Report) -> None:
    page = render_html(week)
    pngs = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">', page)
    assert len(pngs) == 3
    for data in pngs:
        with Image.open(io.BytesIO(base64.b64decode(data))) as img:
            assert img.format == "PNG" and img.width >= 600 and img.height >= 100
    # Nothing to fetch: the page can be mailed.
    assert not re.search(r"(src|href)=\"(?!data:)", page)
