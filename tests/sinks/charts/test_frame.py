"""What every chart shares (``sinks/charts/frame.py``): safe text, rendering on many threads at once."""

from __future__ import annotations

import threading

from sinks.charts import render
from sinks.charts.frame import safe
from tests.sinks.charts.alerts import (
    HOSTILE,
    creep_alert,
    decoded,
    idle_heap_alert,
    late_alert,
    restart_alert,
)


def test_hostile_text_in_names_and_hosts_renders() -> None:
    decoded(render(creep_alert(name=HOSTILE)))
    decoded(render(late_alert(host=HOSTILE)))
    alert = restart_alert()
    ev = {**alert.evidence, "timeline": [[m[0], HOSTILE, m[2]] for m in alert.evidence["timeline"]]}
    decoded(render(alert.model_copy(update={"evidence": ev, "job_name": HOSTILE})))


def test_safe_text_is_one_drawable_line_without_math() -> None:
    text = safe(HOSTILE, 40)
    assert len(text.replace("\\$", "$")) == 40 and text.endswith("…")
    assert "\x00" not in text and "\x1b" not in text and "\U0001f525" not in text
    assert "\\$\\frac" in text  # every dollar escaped: no math mode
    assert safe("a\nb\tc") == "a b c"


def test_threads_render_at_once_alike() -> None:
    alerts = [creep_alert(), late_alert(), restart_alert(), idle_heap_alert()]
    want = [render(a) for a in alerts]
    got: dict[int, bytes | None] = {}

    def work(i: int) -> None:
        got[i] = render(alerts[i % len(alerts)])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[i] for i in range(8)] == want * 2
