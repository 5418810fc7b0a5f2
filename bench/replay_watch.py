"""The ``replay`` phase's tuning loop: ``flinkwatch replay --watch`` as an operator uses it.

The command runs as a process of its own over the small real run (``bench.replay.SMALL``)
with a config file. Once its first try is done, the file is saved ``tries`` times, turning
``checkpoint_state_growth`` off and on again, each save once the try before it has ended.
Measured per save: from the save to the try's ``replay: try N done`` line (``answer_s``:
what the operator waits, the watcher's two agreeing reads of the file included, 0.25-0.5
s) and the try's own time as it logs it (``try_s``); the alerts each try wrote, to check
that each answer is the one its config gives; then the process tree's cores while it
waits for the next save (``idle_cores``, over ``idle_s``). The process tree's CPU is
``utime + stime`` of ``/proc/<pid>/stat`` for the command and every descendant.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

from bench.measure import tree_cpu_s
from bench.replay import REPO, SMALL, replay_command, spread

#: ``checkpoint_state_growth`` pages once in each input (the small run's growth, and the
#: hour's incident): each try's alerts say which config it ran.
ON = "detectors:\n  checkpoint_state_growth: {enabled: true}\n"
OFF = "detectors:\n  checkpoint_state_growth: {enabled: false}\n"


class _Lines:
    """The command's output lines as they arrive, each with its arrival time."""

    def __init__(self, stream: IO[str], copy: IO[str]) -> None:
        self.lines: list[tuple[float, str]] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(
            target=self._read, args=(stream, copy), name="bench-watch-lines", daemon=True
        )
        self._thread.start()

    def _read(self, stream: IO[str], copy: IO[str]) -> None:
        for line in stream:
            copy.write(line)
            with self._cond:
                self.lines.append((time.monotonic(), line))
                self._cond.notify_all()

    def wait_for(self, text: str, timeout_s: float, since: int) -> tuple[int, float, str]:
        """The first line from the ``since``-th on holding ``text``: its index, arrival, text."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            start = since
            while True:
                for i, (at, line) in enumerate(self.lines[start:], start):
                    if text in line:
                        return i, at, line
                start = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive() and start == len(self.lines):
                    msg = f"no line with {text!r} within {timeout_s} s"
                    raise TimeoutError(msg)
                self._cond.wait(min(left, 1.0))


def watch_phase(
    work: Path,
    tries: int = 6,
    idle_s: float = 20.0,
    files: tuple[list[Path], list[Path]] | None = None,
) -> dict[str, Any]:
    """``flinkwatch replay --watch``: its first try, then ``tries`` saves, then its idle cost.

    ``files``: the logs and metrics to replay (default: the small real run's).
    """
    work.mkdir(parents=True, exist_ok=True)
    config, output = work / "watch.yaml", work / "watch.jsonl"
    config.write_text(ON)
    logs, metrics = files or (sorted(SMALL.glob("*.log")), sorted(SMALL.glob("*.jsonl")))
    cmd = [*replay_command(logs, metrics, output), "--config", str(config), "--watch"]
    answers, own, alerts, cpu = [], [], [], []
    with (work / "watch.log").open("w") as copy:
        t0 = time.monotonic()
        p = subprocess.Popen(  # noqa: S603
            cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert p.stdout is not None
        lines = _Lines(p.stdout, copy)
        try:
            seen, first_at, _ = lines.wait_for("replay: watching", 1800, 0)
            first_s = first_at - t0
            # A try parses nothing the first did not: it takes no longer, whatever the hour.
            timeout_s = max(60.0, 2 * first_s)
            alerts.append(len(output.read_text().splitlines()))
            for n in range(2, tries + 2):
                before = tree_cpu_s(p.pid)
                saved = time.monotonic()
                config.write_text(OFF if n % 2 == 0 else ON)
                seen, done_at, line = lines.wait_for(f"replay: try {n} done", timeout_s, seen + 1)
                answers.append(done_at - saved)
                own.append(float(line.split(" in ")[-1].split()[0]))
                seen, _, _ = lines.wait_for("replay: watching", timeout_s, seen + 1)
                cpu.append(tree_cpu_s(p.pid) - before)
                alerts.append(len(output.read_text().splitlines()))
            time.sleep(2.0)  # the last try's stragglers (progress thread, GC) out of the window
            idle_from = tree_cpu_s(p.pid)
            time.sleep(idle_s)
            idle = (tree_cpu_s(p.pid) - idle_from) / idle_s
        finally:
            p.send_signal(signal.SIGTERM)
            rc = p.wait(60)
    return {
        "first_try_s": round(first_s, 2),
        "answer_s": spread(answers),
        "try_s": spread(own),
        "try_cpu_s": spread(cpu),
        "alerts_per_try": alerts,
        "idle_cores": round(idle, 4),
        "idle_window_s": idle_s,
        "exit_code": rc,
    }


if __name__ == "__main__":
    import json
    import sys

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "bench" / ".work" / "watch"
    fleet = Path(sys.argv[2]) if len(sys.argv) > 2 else None  # a fleet bench.replay wrote
    given = ([fleet / "logs"], [fleet / "metrics"]) if fleet else None
    print(json.dumps(watch_phase(out, tries=2 if fleet else 6, files=given), indent=2))
