"""Real shipper captures: fixtures that say how they were made, and the shapes that parse.

Each directory under ``tests/data/shippers/`` holds what one shipper (Telegraf, the
OpenTelemetry Collector) wrote into a real Kafka broker while it carried a real Flink 2.3
run (``scripts/capture_shippers_metrics.py``): the shipper's config, the run's log and
canonical scrapes, every Kafka record as consumed, and one values file per topic. The
configs in ``scripts/shippers/`` are the ones that ran, filters included: the docs copy
them, so a config edited without a new capture fails here.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from streaming.metric_parsing import parse_metrics
from streaming.sources import file_records, stage_files

REPO = Path(__file__).resolve().parents[2]
SHIPPERS = REPO / "tests" / "data" / "shippers"
#: The metric shippers' captures (the log shippers' are tests/streaming/test_log_shippers.py's).
METRIC_SHIPPERS = ("telegraf", "otelcol")
CAPTURES = sorted(
    d
    for d in SHIPPERS.iterdir()
    if (d / "README.md").exists() and d.name.split("_", 1)[0] in METRIC_SHIPPERS
)
#: Series the Prometheus receiver adds about its own scrape; metric relabeling keeps them.
OTEL_SCRAPE_SERIES = {
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
}


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


capture = _script("capture_shippers_metrics")
capture_flink = _script("capture_flink")


def _records(folder: Path) -> list[dict]:
    (path,) = folder.glob("*.records.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _canonical_names(folder: Path) -> set[str]:
    run = folder.name.split("_", 1)[1]
    lines = (folder / f"{run}.jsonl").read_text().splitlines()
    return {json.loads(line)["name"] for line in lines}


def test_every_capture_says_how_it_was_made_with_the_configs_that_ran() -> None:
    assert {d.name.split("_", 1)[0] for d in CAPTURES} == {"telegraf", "otelcol"}
    for folder in CAPTURES:
        how = (folder / "README.md").read_text()
        for needed in ("capture_shippers_metrics.py", "build_shippers.sh", "apache-flink 2.3.0"):
            assert needed in how, (folder.name, needed)
        shipper = folder.name.split("_", 1)[0]
        for cfg in capture.CONFIGS[shipper]:
            shipped = (REPO / "scripts" / "shippers" / cfg).read_bytes()
            assert (folder / cfg).read_bytes() == shipped, (folder.name, cfg)


@pytest.mark.parametrize("folder", CAPTURES, ids=lambda d: d.name)
def test_each_values_file_is_its_topics_records_in_kafka_time_order(folder: Path) -> None:
    records = _records(folder)
    run = folder.name.split("_", 1)[1]
    shipper = folder.name.split("_", 1)[0]
    topics = {t: suffix for t, (owner, suffix) in capture.TOPICS.items() if owner == shipper}
    assert {r["topic"] for r in records} == set(topics)
    for topic, suffix in topics.items():
        mine = sorted(
            (r for r in records if r["topic"] == topic),
            key=lambda r: (r["timestamp_ms"], r["partition"], r["offset"]),
        )
        want = "".join(v if v.endswith("\n") else v + "\n" for v in (r["value"] for r in mine))
        assert (folder / f"{run}.{suffix}").read_text() == want, topic


def test_telegraf_filters_keep_exactly_the_families_the_run_scraped() -> None:
    folder = SHIPPERS / "telegraf_growth_2_3"
    conf = tomllib.loads((REPO / "scripts" / "shippers" / "telegraf.conf").read_text())
    v2, v1 = conf["inputs"]["prometheus"]
    assert (v2["metric_version"], v1["metric_version"]) == (2, 1)
    families = _canonical_names(folder)
    assert set(v2["fieldinclude"]) == set(v1["namepass"]) == families
    assert all(capture_flink.KEEP.match(name) for name in families)
    for r in _records(folder):
        if r["topic"] == "telegraf.json":
            (name,) = json.loads(r["value"])["fields"]
        elif r["topic"] == "telegraf.json.v1":
            name = json.loads(r["value"])["name"]
        else:  # line protocol: measurement,tags fields timestamp
            series, fields, _ = r["value"].split(" ")
            v1 = r["topic"].endswith(".v1")
            name = series.split(",")[0] if v1 else fields.split("=")[0]
        assert name in families, (r["topic"], name)


def test_otelcol_relabeling_is_capture_flinks_filter() -> None:
    folder = SHIPPERS / "otelcol_growth_2_3"
    conf = yaml.safe_load((REPO / "scripts" / "shippers" / "otelcol.yaml").read_text())
    (scrape,) = conf["receivers"]["prometheus"]["config"]["scrape_configs"]
    (keep,) = scrape["metric_relabel_configs"]
    # Prometheus anchors relabeling expressions at both ends; KEEP spells the anchors out.
    assert f"^{keep['regex']}$" == capture_flink.KEEP.pattern
    names = set()
    for r in _records(folder):
        if r["topic"] == "otel.metrics":
            for rm in json.loads(r["value"])["resourceMetrics"]:
                for sm in rm["scopeMetrics"]:
                    names |= {m["name"] for m in sm["metrics"]}
    assert names - OTEL_SCRAPE_SERIES == _canonical_names(folder)


@pytest.mark.spark
@pytest.mark.parametrize(
    "suffix",
    [
        "telegraf-json.jsonl",
        "telegraf-json-v1.jsonl",
        "telegraf-influx.lp",
        "telegraf-influx-v1.lp",
    ],
)
def test_telegraf_json_parses_to_the_series_of_the_runs_own_scrapes(
    spark, tmp_path: Path, suffix: str
) -> None:
    # Telegraf's JSON and line protocol, metric_version 2 and 1 alike, reach the detectors as the same
    # series the canonical scrapes of the same reporter do. (Their host differs: Telegraf
    # puts its own machine's name where Flink's TaskManager series have an empty host.)
    folder = SHIPPERS / "telegraf_growth_2_3"
    series = ["metric", "job_id", "tm_id", "task"]

    def parsed(name: str) -> list:
        staged = stage_files([folder / name], tmp_path / name)
        return parse_metrics(file_records(spark, staged, kind="metric", stream=False)).collect()

    shipped, canonical = parsed(f"growth_2_3.{suffix}"), parsed("growth_2_3.jsonl")
    assert len(shipped) == 600
    assert [r["error"] for r in shipped if r["error"] is not None] == []
    assert {tuple(r[c] for c in series) for r in shipped} == {
        tuple(r[c] for c in series) for r in canonical
    }


@pytest.mark.spark
def test_otlp_json_parses_to_the_series_of_the_runs_own_scrapes(spark, tmp_path: Path) -> None:
    # Every gauge and sum point of the Collector's records is a sample: the run's own series,
    # and the receiver's series about its scrape (no detector reads them). The points it
    # marks as no longer recorded (the cancelled job's series) are none.
    folder = SHIPPERS / "otelcol_growth_2_3"
    series = ["metric", "job_id", "tm_id", "task"]

    def parsed(name: str) -> list:
        staged = stage_files([folder / name], tmp_path / name)
        records = file_records(spark, staged, kind="metric", stream=False)
        return parse_metrics(records, shapes=True).collect()

    shipped, canonical = parsed("growth_2_3.otlp-metrics.jsonl"), parsed("growth_2_3.jsonl")
    assert [r["error"] for r in shipped if r["error"] is not None] == []
    assert {r["shape"] for r in shipped} == {"otlp_json"}
    flink = [r for r in shipped if r["metric"] not in OTEL_SCRAPE_SERIES]
    assert len(flink) == len(canonical) == 600
    assert {tuple(r[c] for c in series) for r in flink} == {
        tuple(r[c] for c in series) for r in canonical
    }
