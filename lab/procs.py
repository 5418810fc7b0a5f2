"""Processes for the tests and the benchmark: free ports, process trees, a Spark cluster.

Linux only (reads /proc). Shared by ``tests/`` and ``bench/``, so neither imports the other.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


# Ports are picked below the kernel's ephemeral range. A port the kernel hands to
# ``bind(0)`` is the next one it may hand to any other process's ``bind(0)`` or outgoing
# connection once we close it: a run's PySpark accumulator server took the port a test had
# just picked for the run's /metrics (six errors in one suite run). Below the range only
# these pickers choose ports, each test worker from its own slice.
_LOWEST_PORT = 20000
#: The ports this process handed out last: not handed out again before their server binds.
_handed_out: deque[int] = deque(maxlen=256)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_slice() -> range:
    """The ports this process picks from: its pytest-xdist worker's share of the range."""
    top = _ephemeral_low()
    if top - _LOWEST_PORT < 1000:  # a kernel whose ephemeral range starts low: no room
        return range(0)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "").removeprefix("gw")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.isdigit() or count < 2:
        return range(_LOWEST_PORT, top)
    size = (top - _LOWEST_PORT) // count
    low = _LOWEST_PORT + int(worker) % count * size
    return range(low, low + size)


def _all_free(first: int, n: int) -> bool:
    socks: list[socket.socket] = []
    try:
        for p in range(first, first + n):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", p))
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()
    return True


def free_port_run(n: int) -> int:
    """A port p such that p, p+1, ..., p+n-1 are all free on 127.0.0.1.

    Chosen below the ephemeral range (see above) when the kernel leaves room there, else
    from ``bind(0)``.
    """
    ports = _port_slice()
    rng = random.Random()
    for _ in range(200):
        if len(ports) > n:
            port = rng.randrange(ports.start, ports.stop - n + 1)
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port + n > 65535:
                continue
        if all(p not in _handed_out for p in range(port, port + n)) and _all_free(port, n):
            _handed_out.extend(range(port, port + n))
            return port
    msg = f"no run of {n} free ports"
    raise RuntimeError(msg)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 (picked as ``free_port_run`` picks)."""
    return free_port_run(1)


def free_port_pair() -> int:
    """A port p such that p and p+1 (the KRaft controller) are free on 127.0.0.1."""
    return free_port_run(2)


def wait_until(cond: Callable[[], bool], timeout: float = 120, what: str = "condition") -> None:
    """Poll until ``cond()`` holds; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.5)
    msg = f"timed out after {timeout:.0f}s waiting for {what}"
    raise AssertionError(msg)


def wait_while_progressing(
    cond: Callable[[], bool],
    progress: Callable[[], object],
    stall_s: float = 180,
    what: str = "condition",
    every_s: float = 2.0,
) -> None:
    """Poll until ``cond()`` holds, for as long as ``progress()`` keeps changing.

    For a wait whose length depends on how fast the machine is (a job working through a
    backlog): a fixed timeout fails on a busy machine what an idle one passes. This fails
    only when ``progress()`` (anything comparable: counters, a watermark) has not changed
    for ``stall_s`` seconds, that is when the thing waited for has stopped moving.
    """
    last, since = progress(), time.monotonic()
    while not cond():
        now = progress()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > stall_s:
            msg = f"no progress for {stall_s:.0f}s (still at {last!r}) waiting for {what}"
            raise AssertionError(msg)
        time.sleep(every_s)


# --- Spark standalone cluster ------------------------------------------------------------


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def children() -> dict[int, list[int]]:
    """Every process's children, by parent pid (from /proc)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    return kids


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    kids, out, todo = children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def kill_all(pids: Iterable[int], sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to each of ``pids`` still running (a tree listed by :func:`descendants`).

    The Spark JVM of ``flinkwatch run`` is in a session of its own (streaming/session.py):
    a signal to the driver's process group no longer reaches it, so list the tree first.
    """
    for p in pids:
        if alive(p):
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass


def cmdline(pid: int) -> str:
    """The command line of ``pid`` ('' once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class SparkCluster:
    """A local Spark standalone master and workers, started by scripts/spark-cluster.sh.

    Each daemon runs in a process group of its own, which its executor JVM and Python
    workers share: :meth:`kill_worker` takes all of them down at once, as a lost host would.
    """

    def __init__(
        self,
        work_dir: Path,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        daemon_java: str = "",
    ) -> None:
        """``daemon_java``: more JVM options of the master and the workers (not executors)."""
        self.workers = workers
        self.dir = work_dir
        self.port = free_port_run(1)
        self.ui_port = free_port_run(workers + 1)  # master UI, then one per worker
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "FLINKWATCH_SPARK_DIR": str(work_dir),
            "FLINKWATCH_SPARK_PORT": str(self.port),
            "FLINKWATCH_SPARK_UI_PORT": str(self.ui_port),
            "FLINKWATCH_SPARK_WORKERS": str(workers),
            "FLINKWATCH_WORKER_CORES": str(cores),
            "FLINKWATCH_WORKER_MEMORY": memory,
            "PYTHON": sys.executable,
        }
        if daemon_java:
            self.env["SPARK_DAEMON_JAVA_OPTS"] = daemon_java

    def _script(self, *args: str) -> str:
        out = subprocess.run(
            [str(REPO / "scripts" / "spark-cluster.sh"), *args],
            env=self.env,
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        return out.stdout.strip()

    def up(self) -> SparkCluster:
        """Start the master and the workers; returns once every worker is registered."""
        url = self._script("up").splitlines()[-1]
        if url != self.url:
            msg = f"spark-cluster.sh printed {url!r}, expected {self.url!r}"
            raise RuntimeError(msg)
        return self

    def down(self) -> None:
        """Stop every daemon with its executors (logs and work dirs are kept)."""
        self._script("down")

    def worker_pid(self, i: int) -> int:
        """Pid (and process group) of worker ``i`` (1-based)."""
        return int((self.dir / f"worker-{i}.pid").read_text())

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i``'s process group (worker, executor, Python workers)."""
        pid = self.worker_pid(i)
        os.killpg(pid, signal.SIGKILL)
        wait_until(lambda: not alive(pid), timeout=30, what=f"worker {i} to die")

    def group(self, i: int) -> list[int]:
        """Live processes of worker ``i``'s process group (worker, executor, Python workers)."""
        pgid, out = self.worker_pid(i), []
        for d in os.listdir("/proc"):
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[2] == str(pgid) and fields[0] != "Z":
                out.append(int(d))
        return out

    def executors(self, i: int) -> dict[str, int]:
        """Executor JVMs that worker ``i`` runs now: executor id → pid."""
        out: dict[str, int] = {}
        for pid in children().get(self.worker_pid(i), []):
            args = cmdline(pid).split()
            if "--executor-id" in args and alive(pid):
                out[args[args.index("--executor-id") + 1]] = pid
        return out
