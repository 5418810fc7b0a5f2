"""Process helpers of the tests and the bench (``lab/procs.py``), on real processes and ports."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
from collections.abc import Iterator

import pytest

from lab import procs
from lab.procs import (
    alive,
    children,
    cmdline,
    descendants,
    free_port_pair,
    free_port_run,
    kill_all,
    wait_until,
    wait_while_progressing,
)


def bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_a_free_port_pair_and_run_are_free_to_bind() -> None:
    pair = free_port_pair()
    assert bindable(pair) and bindable(pair + 1)
    run = free_port_run(4)
    assert all(bindable(p) for p in range(run, run + 4))


def ephemeral_low() -> int:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        return int(f.read().split()[0])


#: A kernel whose ephemeral range starts below 21000 leaves the pickers no room under it:
#: they take ports from bind(0) there, as before.
below_the_range = pytest.mark.skipif(
    ephemeral_low() < 21000, reason="the kernel's ephemeral range leaves no room below it"
)


@below_the_range
def test_ports_are_picked_where_the_kernel_does_not_hand_out_ports_of_its_own() -> None:
    # A port from bind(0) may go to the next process that binds port 0 once it is closed.
    low = ephemeral_low()
    picked = [free_port_run(3) for _ in range(20)]
    assert all(p + 2 < low for p in picked), (picked, low)
    assert len(set(picked)) > 1  # not one fixed port: two suites on one machine


@below_the_range
def test_a_port_handed_out_is_not_handed_out_again_before_its_server_binds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two servers of one test, each given a port before either binds: the second pick
    # lands on the first's port (forced here), which is still free to bind.
    first = free_port_run(2)
    landing = itertools.chain([first + 1, first], range(first + 40, first + 240))

    class Picks:
        def randrange(self, _start: int, _stop: int) -> int:
            return next(landing)

    monkeypatch.setattr(procs.random, "Random", Picks)
    assert free_port_run(2) >= first + 40


@below_the_range
def test_each_test_worker_picks_from_its_own_share_of_the_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    shares = []
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        shares.append({free_port_run(2) for _ in range(30)})
    assert max(shares[0]) + 1 < min(shares[1])


def test_wait_until_returns_once_the_condition_holds_and_names_what_it_waited_for() -> None:
    calls = itertools.count()
    wait_until(lambda: next(calls) >= 2, timeout=30)
    with pytest.raises(AssertionError, match="timed out after 1s waiting for the moon"):
        wait_until(lambda: False, timeout=1, what="the moon")


def test_a_wait_goes_on_while_progress_moves_and_fails_once_it_stalls() -> None:
    steps = itertools.count()
    done = [False]

    def progress() -> int:
        n = next(steps)
        done[0] = n >= 5
        return n

    wait_while_progressing(lambda: done[0], progress, stall_s=5, every_s=0.01)
    with pytest.raises(AssertionError, match=r"no progress for 0s \(still at 7\) waiting for x"):
        wait_while_progressing(lambda: False, lambda: 7, stall_s=0.2, what="x", every_s=0.01)


@pytest.fixture
def tree() -> Iterator[subprocess.Popen[bytes]]:
    """A shell with a sleeping child: a process tree of two."""
    proc = subprocess.Popen(["sh", "-c", "sleep 300 & wait"])
    try:
        yield proc
    finally:
        kill_all(descendants(proc.pid))
        proc.wait(timeout=30)


def test_a_process_tree_is_listed_named_and_killed_whole(tree: subprocess.Popen[bytes]) -> None:
    wait_until(lambda: bool(children().get(tree.pid)), timeout=30, what="the sleep to start")
    (sleep,) = children()[tree.pid]
    assert descendants(tree.pid) == [tree.pid, sleep]
    assert cmdline(sleep) == "sleep 300 " and cmdline(tree.pid).startswith("sh -c ")
    assert alive(tree.pid) and alive(sleep)
    assert os.getpid() in children()[os.getppid()]
    kill_all(descendants(tree.pid))
    tree.wait(timeout=30)
    assert not alive(tree.pid)  # reaped: gone
    wait_until(lambda: not alive(sleep), timeout=30, what="the orphaned sleep to be reaped")
    assert cmdline(tree.pid) == ""
    kill_all([tree.pid])  # a process already gone is passed over


def test_a_pid_that_never_was_is_not_alive() -> None:
    assert not alive(2**22 + 1) and cmdline(2**22 + 1) == ""
