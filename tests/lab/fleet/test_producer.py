"""produce: records to Kafka topics, paced by event time, failures raised."""

from __future__ import annotations

import pytest

from lab import fleet as sim
from lab.fleet import FleetSpec, SimRecord
from lab.fleet import producer as fleet_producer
from tests.lab.fleet.helpers import (
    START_MS,
    run,
)


class FakeFuture:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    def add_errback(self, fn) -> None:
        if self.error is not None:
            fn(self.error)


class FakeProducer:
    instances: list[FakeProducer] = []

    def __init__(self, **config: object) -> None:
        self.config = config
        self.sent: list[tuple[str, bytes | None, bytes, int]] = []
        self.flushed = self.closed = False
        self.fail_topic: str | None = None
        FakeProducer.instances.append(self)

    def send(self, topic: str, value: bytes, key: bytes | None, timestamp_ms: int) -> FakeFuture:
        assert not self.flushed
        self.sent.append((topic, key, value, timestamp_ms))
        return FakeFuture(RuntimeError("broker says no") if topic == self.fail_topic else None)

    def flush(self) -> None:
        self.flushed = True

    def close(self) -> None:
        self.closed = True


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> type[FakeProducer]:
    FakeProducer.instances = []
    monkeypatch.setattr(fleet_producer, "KafkaProducer", FakeProducer)
    return FakeProducer


def test_produce_routes_streams_to_topics_with_keys_and_event_times(producer) -> None:
    spec = FleetSpec(jobs=2)
    records = run(spec, 60)
    counts: list[int] = []
    n = sim.produce(
        iter(records), "localhost:9092", "flink.logs", "flink.metrics", progress=counts.append
    )
    (p,) = producer.instances
    assert n == len(records) == len(p.sent)
    assert p.config["bootstrap_servers"] == "localhost:9092"
    for rec, (topic, key, value, ts) in zip(records, p.sent, strict=True):
        assert topic == ("flink.logs" if rec.stream == "log" else "flink.metrics")
        assert (key, value, ts) == (rec.key, rec.value, rec.time_ms)
    assert p.flushed and p.closed
    assert counts[-1] == n


def test_produce_in_real_time_paces_by_event_time(producer, monkeypatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(fleet_producer, "time", clock)
    records = [SimRecord("log", START_MS + offset, None, b"x") for offset in (0, 0, 1500, 4000)]
    sim.produce(records, "k:9092", "l", "m", realtime=True)
    assert clock.now == pytest.approx(104.0)
    assert clock.sleeps == pytest.approx([1.5, 2.5])


def test_produce_raises_when_kafka_rejects_records(producer, monkeypatch) -> None:
    original = FakeProducer.__init__

    def failing(self, **config: object) -> None:
        original(self, **config)
        self.fail_topic = "m"

    monkeypatch.setattr(FakeProducer, "__init__", failing)
    with pytest.raises(sim.ProduceError) as err:
        sim.produce(run(FleetSpec(jobs=1), 30), "k:9092", "l", "m")
    assert err.value.topic == "m"
    assert producer.instances[0].closed
