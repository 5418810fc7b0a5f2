from __future__ import annotations

from detectors.model import Event
from detectors.rules.params import Labels, figure, name_matches, short_metric
from tests.detectors.rules.helpers import BP, rule


def test_names_match_whole_in_both_reporter_spellings() -> None:
    assert name_matches("orders-.*", "orders_enrichment")
    assert name_matches("orders-.*", "orders-enrichment")
    assert not name_matches("orders", "orders-enrichment")  # whole, not searched
    assert not name_matches(".*", None)


def test_labels_admit_events_by_every_pattern_given() -> None:
    labels = Labels(task="Sink.*", host="w-1")
    assert labels.admits(Event("metric", 0, task="Sink:_x/0", host="w_1"))
    assert not labels.admits(Event("metric", 0, task="Sink:_x/0", host="w_2"))
    assert not labels.admits(Event("metric", 0, task="Map/0", host="w_1"))
    assert Labels().admits(Event("metric", 0))


def test_words() -> None:
    assert short_metric(BP) == "backPressuredTimeMsPerSecond"
    assert (
        short_metric("flink_taskmanager_Status_JVM_Memory_Heap_Used")
        == "Status_JVM_Memory_Heap_Used"
    )
    assert short_metric("custom") == "custom"
    assert figure(1234.5) == "1,234" and figure(0.5) == "0.5"


def test_a_job_filter_by_id_and_name() -> None:
    r = rule(kind="threshold", metric=BP, value=1, job_id="j1", job_name="orders")
    assert r.admits_job("j1", "orders")
    assert not r.admits_job("j2", "orders")
    assert not r.admits_job("j1", None)
    assert "[job_id j1, job_name ~ orders]" in r.describe()
