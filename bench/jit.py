"""Where the JVM's JIT time goes while ``flinkwatch run`` watches a steady stream (issue #34).

``python -m bench.jit --name base`` starts a broker of its own, writes the latency phase's
100-job fleet (``--rate`` records/s, ten incidents) for ``--minutes``, sends it in real
time with the bench's producer and runs ``flinkwatch run`` (the command, a process of its
own) on it, its JVM logging each class it loads (``-Xlog:class+load``) and each method the
JIT compiles (``-Xlog:jit+compilation=debug``), and Spark's metrics written as CSV every
10 s (``CodeGenerator.compilationTime``: one sample per class Spark generated and Janino
compiled). Every 10 s it samples the CPU of the process tree and of the JVM's threads.
``--jvm=OPTIONS`` adds JVM options to the driver (``--jvm=-XX:TieredStopAtLevel=1``),
``--spark KEY=VALUE`` a Spark setting (``spark.options``), ``--setting KEY=VALUE`` a key of
the config's ``spark`` section (``--setting realtime_batch_s=30``).

It prints a row per ``--step-s`` window: cores of the process tree and of the JVM, the C2
and C1 compiler threads' CPU seconds per minute, classes loaded per minute (Spark's
generated ones apart), Spark's codegen compiles per minute, C2 compiles per minute (a
method's first and its later ones), and each query's committed batches. The run's files
stay in ``bench/.work/jit/<name>``. Compare settings in runs at the same time, and read
the counts (per batch) before the seconds: a busy machine changes the seconds more.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from bench import key_value, yaml_setting
from bench.idle import _commits, _jvm, _threads, _tree, stop
from bench.measure import proc_cpu_s
from streaming.session import driver_java

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "bench" / ".work" / "jit"
#: A JIT log line: ``[12.3s] id attributes level method (size bytes) [made not entrant]``.
_COMPILE = re.compile(
    r"^\[([\d.]+)s\]\s+\d+\s+([%sbn!]*)\s*(\d)\s+(\S+)(?: @ \d+)? \(\d+ bytes\)(.*)$"
)
_LOADED = re.compile(r"^\[([\d.]+)s\] (\S+)")


def run_config(
    args: argparse.Namespace,
    bootstrap: str,
    prefix: str,
    out: Path,
    jvm_opts: str,
    ui_port: int,
    detectors: dict[str, Any],
) -> str:
    """The run's ``flinkwatch.yaml``: the topics, ``--setting`` and ``--spark``, validated.

    Raises:
        conf.ConfigError: a ``--setting`` the config refuses (its field named), before
            anything has started.
    """
    from conf import load_config

    cfg = {
        "cluster": "jit",
        "kafka": {
            "bootstrap_servers": bootstrap,
            **{f"{t}_topic": f"{prefix}.{t}" for t in ("logs", "metrics", "events", "deadletters")},
        },
        "output": {"state_dir": str(out / "state"), "console": False},
        "metrics": {"enabled": False},
        "detectors": detectors,
        "spark": {
            **dict(args.setting),
            "ui_port": ui_port,
            "options": {
                "spark.driver.extraJavaOptions": jvm_opts,
                "spark.metrics.conf.*.sink.csv.class": "org.apache.spark.metrics.sink.CsvSink",
                "spark.metrics.conf.*.sink.csv.period": "10",
                "spark.metrics.conf.*.sink.csv.unit": "seconds",
                "spark.metrics.conf.*.sink.csv.directory": str(out / "csv"),
                **dict(args.spark),
            },
        },
    }
    text = yaml.safe_dump(cfg)
    load_config(out / "flinkwatch.yaml", text=text)
    return text


def run(args: argparse.Namespace) -> Path:
    """One ``flinkwatch run`` under load, sampled; returns its directory."""
    from bench import incidents as inc
    from bench.load import compile_producer, producer_command, write_load
    from bench.run import Broker, _records_per_job_per_s
    from lab.fleet import generate
    from lab.procs import free_port_run

    out = WORK / args.name
    out.mkdir(parents=True, exist_ok=True)
    prefix = re.sub(r"[^a-z0-9]", "", args.name.lower()) or "jit"
    broker = Broker([f"{prefix}.logs", f"{prefix}.metrics"], 2)
    # A broker directory per run, so that runs side by side (one setting each, measured
    # in the same minutes) do not stop each other's.
    broker.env["FLINKWATCH_KAFKA_DIR"] = str(out / "kafka")
    broker.start()
    proc = prod = None
    try:
        per_job = _records_per_job_per_s(4)
        jobs = max(1, round(args.rate / per_job))
        run_s = args.minutes * 60
        planned, _ = inc.plan(jobs, 4, 10, run_s)
        spec = inc.spec(jobs, 4, planned, seed=23)
        start_ms = int((time.time() + 75) * 1000)  # generating, then the queries' start
        load = write_load(generate(spec, start_ms, run_s), out / "load.bin")
        (out / "csv").mkdir(exist_ok=True)
        jvm_opts = (
            # flinkwatch's own options first (the class archive's too): this setting
            # replaces them.
            driver_java(
                "local",
                f"-Xlog:class+load=info:file={out}/classload.log:uptime",
                f"-Xlog:jit+compilation=debug:file={out}/jit.log:uptime",
                *args.jvm.split(),
            )
        )
        cfg = run_config(
            args, broker.bootstrap, prefix, out, jvm_opts, free_port_run(1), inc.DETECTORS
        )
        (out / "flinkwatch.yaml").write_text(cfg)
        exe = Path(sys.executable).with_name("flinkwatch")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with (out / "run.log").open("w") as log:
            proc = subprocess.Popen(
                [str(exe), "run", "--config", str(out / "flinkwatch.yaml")],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        classes = compile_producer(REPO / "bench" / ".work")
        time.sleep(max(0.0, start_ms / 1000 - time.time() - 1))
        prod = subprocess.Popen(
            producer_command(
                classes, broker.bootstrap, f"{prefix}.logs", f"{prefix}.metrics", load.path, True
            ),
            stdout=subprocess.DEVNULL,
        )
        t0 = time.time()
        with (out / "samples.jsonl").open("w") as samples:
            while time.time() - t0 < run_s + 20 and proc.poll() is None:
                samples.write(json.dumps(sample(proc.pid, out, t0)) + "\n")
                samples.flush()
                time.sleep(10)
        load.path.unlink(missing_ok=True)
    finally:
        for p in (prod, proc):
            if p is not None and p.poll() is None:
                stop(p)
        broker.stop()
    return out


def sample(pid: int, out: Path, t0: float) -> dict[str, Any]:
    """CPU seconds of each process of the tree and of the JVM's threads, batches so far."""
    pids = _tree(pid)
    jvm = _jvm(pids)
    return {
        "t": round(time.time() - t0, 1),
        "wall": time.time(),
        "cpu": {str(p): proc_cpu_s(p) for p in pids},
        "jvm": jvm,
        "uptime": _uptime(jvm) if jvm else None,
        "threads": dict(_threads(jvm)) if jvm else {},
        "commits": _commits(out / "state"),
    }


def _uptime(pid: int) -> float | None:
    """Seconds since process ``pid`` started: the clock of the JVM's own logs."""
    try:
        with open("/proc/uptime") as f:
            now = float(f.read().split()[0])
        with open(f"/proc/{pid}/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None
    return now - started


def summarize(out: Path, step_s: float) -> list[dict[str, Any]]:
    """One row per ``step_s`` of the samples (see the module's docstring)."""
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    # The JVM's logs are stamped with its uptime: the samples' cut them at the same instants.
    rows = [r for r in rows if r["uptime"] is not None]
    compiles = _compiles(out / "jit.log")
    loads = _loads(out / "classload.log")
    codegen = _codegen(out / "csv")
    step = max(1, round(step_s / 10))
    table = []
    for a, b in zip(rows[::step], rows[step::step], strict=False):
        dt = b["t"] - a["t"]
        lo, hi = a["uptime"], b["uptime"]
        tree = sum((b["cpu"][p] or 0) - (a["cpu"].get(p) or 0) for p in b["cpu"] if p in a["cpu"])
        jvm = str(b["jvm"])
        th = collections.Counter[str]()
        for name, s in b["threads"].items():
            th[re.sub(r"#?\d+$", "", name)] += s - a["threads"].get(name, 0.0)
        c2_first = sum(1 for t, first in compiles if lo <= t < hi and first)
        c2_again = sum(1 for t, first in compiles if lo <= t < hi and not first)
        generated = sum(1 for t, gen in loads if lo <= t < hi and gen)
        loaded = sum(1 for t, _gen in loads if lo <= t < hi)
        cg = [n for w, n in codegen if a["wall"] <= w < b["wall"]]
        per_min = 60 / dt
        table.append(
            {
                "t_s": round(a["t"]),
                "tree_cores": round(tree / dt, 3),
                "jvm_cores": round(((b["cpu"].get(jvm) or 0) - (a["cpu"].get(jvm) or 0)) / dt, 3),
                "c2_cpu_s_per_min": round(th["C2 CompilerThre"] * per_min, 2),
                "c1_cpu_s_per_min": round(th["C1 CompilerThre"] * per_min, 2),
                "classes_per_min": round(loaded * per_min),
                "generated_classes_per_min": round(generated * per_min),
                "codegen_compiles_per_min": round((cg[-1] - cg[0]) * per_min) if cg else None,
                "c2_compiles_per_min": {
                    "first": round(c2_first * per_min),
                    "again": round(c2_again * per_min),
                },
                "batches": {
                    q.split("-")[0]: b["commits"].get(q, 0) - a["commits"].get(q, 0)
                    for q in b["commits"]
                },
            }
        )
    return table


def _compiles(path: Path) -> list[tuple[float, bool]]:
    """C2 compiles (level 4): uptime, and whether it is the method's first."""
    seen: set[str] = set()
    out = []
    for line in path.read_text(errors="replace").splitlines():
        m = _COMPILE.match(line)
        if m is None or m.group(3) != "4" or "made " in m.group(5):
            continue
        out.append((float(m.group(1)), m.group(4) not in seen))
        seen.add(m.group(4))
    return out


def _loads(path: Path) -> list[tuple[float, bool]]:
    """Classes loaded: uptime, and whether Spark generated it (Janino's ``GeneratedClass``)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        m = _LOADED.match(line)
        if m is not None:
            out.append((float(m.group(1)), "GeneratedClass" in m.group(2)))
    return out


def _codegen(csv_dir: Path) -> list[tuple[float, int]]:
    """Spark's codegen compiles so far, by wall-clock time (its CSV metric sink)."""
    files = sorted(csv_dir.glob("*.driver.CodeGenerator.compilationTime.csv"))
    if not files:
        return []
    lines = files[-1].read_text().splitlines()[1:]
    return [(float(r.split(",")[0]), int(r.split(",")[1])) for r in lines if r]


def parser() -> argparse.ArgumentParser:
    """The command's arguments."""
    ap = argparse.ArgumentParser(prog="python -m bench.jit", description=__doc__.split("\n")[0])
    ap.add_argument("--name", required=True, help="the run's directory in bench/.work/jit")
    ap.add_argument("--minutes", type=float, default=6)
    ap.add_argument("--rate", type=float, default=500, help="records/s (100 jobs at 500)")
    ap.add_argument("--jvm", default="", help="more driver JVM options (--jvm=-XX:...)")
    ap.add_argument(
        "--spark",
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help="a Spark setting for the run (spark.options), repeatable",
    )
    ap.add_argument(
        "--setting",
        action="append",
        default=[],
        type=yaml_setting,
        metavar="KEY=VALUE",
        help="a key of the config's spark section (realtime_batch_s=30; VALUE as YAML), repeatable",
    )
    ap.add_argument("--step-s", type=float, default=60)
    ap.add_argument("--summarize-only", action="store_true", help="print an earlier run's")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run (unless ``--summarize-only``) and print the table."""
    args = parser().parse_args(argv)
    out = WORK / args.name if args.summarize_only else run(args)
    table = summarize(out, args.step_s)
    (out / "summary.json").write_text(json.dumps(table, indent=1))
    for row in table:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
