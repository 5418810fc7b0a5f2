"""The bench's CPU split: what is flinkwatch's own and what is the bench's."""

from __future__ import annotations

import threading

from bench.measure import cpu_split, instrument, instruments_cpu_s


def test_the_samplers_cpu_is_the_bench_s_not_the_driver_s() -> None:
    cpu = {
        "driver_jvm": 30.0,
        "python_workers": 8.0,
        "driver_python": 5.0,
        "instruments": 2.0,
        "broker": 4.0,
        "producer": 1.0,
        "machine": 50.0,
    }
    stages = {"flinkwatch-parse:cpu": 10.0, "flinkwatch-detect:cpu": 2.0}
    split = cpu_split(cpu, stages, input_s=100.0)
    assert split["driver_python"] == 0.03
    assert split["instruments"] == 0.02
    assert split["jvm_other"] == 0.18
    # parse 0.1 + detect 0.02 + workers 0.08 + driver 0.03 + other 0.18 + broker + producer
    assert split["total"] == 0.46


def test_an_instrument_thread_s_cpu_is_counted_and_kept_after_it_ends() -> None:
    before = instruments_cpu_s()
    done = threading.Event()

    def spin() -> None:
        # Work until the kernel has accounted some of it (progress, not a duration); the
        # bound only keeps a broken count from spinning for ever.
        for _ in range(1_000_000):
            if instruments_cpu_s() - before >= 0.02:
                done.set()
                return
            sum(range(10_000))

    instrument(spin, "test-spin").join()
    assert done.is_set()
    counted = instruments_cpu_s()
    assert counted - before >= 0.02
    assert instruments_cpu_s() >= counted  # the ended thread keeps its last value
