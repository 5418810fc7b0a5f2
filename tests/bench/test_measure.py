"""The bench's CPU split: what is flinkwatch's own and what is the bench's."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from bench.measure import cpu_split, instrument, instruments_cpu_s, proc_cpu_s, tree_cpu_s


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


def test_a_python_worker_that_leaves_the_scan_keeps_its_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.measure as m

    # A worker's own CPU, then gone (exited, or missed by a scan): the most seen of it
    # stays in the group's total, which never falls.
    own: dict[int, float | None] = {10: 1.0, 11: 50.0}
    monkeypatch.setattr(m, "proc_cpu_s", lambda pid, task=None: own.get(pid))
    monkeypatch.setattr(m, "machine_busy_s", lambda: 0.0)
    sampler = m.CpuSampler(jvm_pid=-1, broker_pid=lambda: None)
    members = {10: "python_workers", 11: "python_workers"}
    monkeypatch.setattr(sampler, "_members", lambda: dict(members))
    sampler.sample()
    own[11] = 80.0
    sampler.sample()
    own[11] = None
    del members[11]
    own[10] = 2.0
    sampler.sample()
    workers = [v["python_workers"] for v in sampler.series.v]
    assert workers == [51.0, 81.0, 82.0]


def test_a_process_tree_counts_each_process_once() -> None:
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n"
    child = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", burn + "input()"], stdin=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while (proc_cpu_s(child.pid) or 0.0) < 0.4 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.1)  # done burning: waiting on its input
        # A process with nothing below it: its own CPU, once (the root was counted twice).
        assert tree_cpu_s(child.pid) == pytest.approx(proc_cpu_s(child.pid), abs=0.02)
    finally:
        child.communicate(b"\n", timeout=60)
