"""``python -m lab``: the demo tooling's command line: simulate, demo, slack-emulator.

Not part of the product: the ``flinkwatch`` console script and the wheel do not carry it.
It drives the product (``streaming.cli.run.run_job``) and reads the same config files.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conf import AppConfig, ConfigError
from conf.kafka_client import kafka_settings
from streaming.cli.args import load_or_exit, setup_logging, with_overrides
from streaming.cli.run import run_job

if TYPE_CHECKING:
    from lab.slack import SlackEmulator

log = logging.getLogger("flinkwatch")

#: Where ``scripts/stack.sh`` starts the local broker unless ``FLINKWATCH_KAFKA_PORT``
#: moves it (the packaged config's ``kafka.bootstrap_servers``).
LOCAL_BOOTSTRAP = "127.0.0.1:9092"


def local_bootstrap(
    configured: str, given: str | None, env: Mapping[str, str] | None = None
) -> str:
    """The brokers the lab tools connect to: ``--bootstrap``, else the local stack's port.

    ``scripts/stack.sh`` starts its broker on ``127.0.0.1:$FLINKWATCH_KAFKA_PORT`` when
    the variable is set (9092 is taken, say); the tools follow it, so ``make demo`` with a
    moved port reaches the broker it just started. Only the local stack's address moves:
    a config naming other brokers keeps them.

    Raises:
        ValueError: ``FLINKWATCH_KAFKA_PORT`` is not a port number.
    """
    if given:
        return given
    port = (os.environ if env is None else env).get("FLINKWATCH_KAFKA_PORT", "")
    if not port or configured != LOCAL_BOOTSTRAP:
        return configured
    if not port.isdigit() or not 0 < int(port) < 65_536:
        msg = f"FLINKWATCH_KAFKA_PORT={port!r} is not a port number"
        raise ValueError(msg)
    return f"127.0.0.1:{int(port)}"


def cmd_simulate(args: argparse.Namespace) -> int:
    """Produce a simulated Flink fleet (healthy jobs + injected incidents) into Kafka."""
    from lab import fleet as sim

    cfg = load_or_exit(args.config)
    picked = tuple(args.incident or ())
    # --incident-jobs: checkpoint expiries on the first N jobs (1 unless --incident is used).
    expiring = args.incident_jobs if args.incident_jobs is not None else (0 if picked else 1)
    incidents = picked + tuple(
        sim.Incident(kind="checkpoint_expiry", job_index=i, onset_s=args.incident_at)
        for i in range(min(expiring, args.jobs))
    )
    versions = tuple(args.flink_versions.split(",")) if args.flink_versions else None
    try:
        spec = sim.FleetSpec(
            jobs=args.jobs,
            tms_per_job=args.tms_per_job,
            checkpoint_interval_s=args.checkpoint_interval,
            checkpoint_timeout_s=args.checkpoint_timeout,
            seed=args.seed,
            incidents=incidents,
            **({"flink_versions": versions} if versions else {}),
        )
    except ValueError as exc:
        log.error("simulate: %s", exc)
        return 2
    start_ms = int(args.start_ms if args.start_ms is not None else time.time() * 1000)
    try:
        bootstrap = local_bootstrap(cfg.kafka.bootstrap_servers, args.bootstrap)
        cfg = with_overrides(cfg, {"kafka": {"bootstrap_servers": bootstrap}})
        settings = kafka_settings(cfg.kafka)
    except (ConfigError, ValueError) as exc:
        log.error("simulate: %s", exc)
        return 2
    log.info(
        "simulating %d jobs x %d TaskManagers for %.0f s (%s) into %s; incidents: %s",
        spec.jobs,
        spec.tms_per_job,
        args.duration,
        "real time" if args.realtime else "as fast as possible",
        bootstrap,
        ", ".join(f"{i.kind} on job {i.job_index} at +{i.onset_s:.0f}s" for i in incidents)
        or "none",
    )
    last = {"t": time.monotonic()}

    def progress(n: int) -> None:
        if time.monotonic() - last["t"] >= 5:
            last["t"] = time.monotonic()
            log.info("simulate: %d records sent", n)

    from streaming.topics import KafkaConnectError

    try:
        n = sim.produce(
            sim.generate(spec, start_ms, args.duration),
            settings.python,
            args.logs_topic or cfg.kafka.logs_topic,
            args.metrics_topic or cfg.kafka.metrics_topic,
            realtime=args.realtime,
            progress=progress,
        )
    except KafkaConnectError as exc:
        log.error("simulate: %s", exc)
        return 1
    log.info("simulate: done, %d records sent", n)
    return 0


#: The demo's own topics, so it never mixes with a real fleet's on the same broker.
DEMO_TOPICS = {
    "logs_topic": "demo.flink.logs",
    "metrics_topic": "demo.flink.metrics",
    "events_topic": "demo.flinkwatch.events",
    "deadletters_topic": "demo.flinkwatch.deadletters",
}


def cmd_demo(args: argparse.Namespace) -> int:
    """Simulated fleet (in the background, real time) plus the job, on the local stack."""
    cfg = load_or_exit(args.config)
    state = Path(args.state_dir)
    kafka: dict[str, object] = dict(DEMO_TOPICS)
    try:
        bootstrap = local_bootstrap(cfg.kafka.bootstrap_servers, args.bootstrap)
    except ValueError as exc:
        log.error("demo: %s", exc)
        return 2
    if bootstrap != cfg.kafka.bootstrap_servers:  # then it wins over a reloaded file too
        kafka["bootstrap_servers"] = bootstrap
    cfg = cfg.model_copy(
        update={
            "kafka": cfg.kafka.model_copy(update=kafka),
            "output": cfg.output.model_copy(update={"state_dir": state}),
        }
    )
    emulator, base_slack = _local_slack(cfg) if cfg.slack.mode == "off" else (None, {})
    if base_slack:
        cfg = cfg.model_copy(update={"slack": cfg.slack.model_copy(update=base_slack)})
    if args.fresh:
        # A fresh demo starts from empty topics and state: the simulator's job ids are
        # deterministic, so records of an earlier demo would mix with this one's.
        shutil.rmtree(state, ignore_errors=True)
        _recreate_topics(cfg, list(DEMO_TOPICS.values()))
    sim = _start_simulator(args, cfg)
    try:
        return run_job(
            cfg,
            args.duration,
            config_path=args.config,
            base={
                "kafka": kafka,
                "output": {"state_dir": state},
                **({"slack": base_slack} if base_slack else {}),
            },
        )
    finally:
        if emulator is not None:
            emulator.stop()
        sim.terminate()
        sim.wait(timeout=30)
        log.info("demo: alerts are in %s", cfg.output.alerts_path)


def _local_slack(cfg: AppConfig) -> tuple[SlackEmulator, dict[str, object]]:
    """No Slack configured: a local one, so the demo shows what an on-call channel gets.

    One message per incident, updated on resolve, its chart in the thread. Returns the
    running emulator and the ``slack`` settings that point the job at it.
    """
    from lab.slack import SlackEmulator

    def said(m: dict[str, Any]) -> None:
        files = m.get("files") or []
        what = m.get("text") or ", ".join(
            f"chart {f.get('name')} ({f.get('size', 0) // 1024} KB, {f.get('url_private')})"
            for f in files
        )
        reply = " (thread reply)" if m.get("thread_ts") else ""
        log.warning("SLACK #%s%s: %s", m.get("channel_name", ""), reply, what)

    emulator = SlackEmulator(channels=(cfg.slack.channel,), on_message=said).start()
    os.environ[cfg.slack.token_env] = emulator.token
    log.info("demo: local Slack emulator at %s (set slack.mode to use yours)", emulator.base_url)
    return emulator, {"mode": "bot", "api_url": emulator.base_url}


def _start_simulator(args: argparse.Namespace, cfg: AppConfig) -> subprocess.Popen[bytes]:
    """The simulated fleet, in real time, in a process of its own, onto the demo's topics."""
    sim = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lab",
            "simulate",
            "--realtime",
            # The simulator reaches the broker with the config's settings (security).
            *(["--config", args.config] if args.config else []),
            "--bootstrap",
            cfg.kafka.bootstrap_servers,
            "--logs-topic",
            cfg.kafka.logs_topic,
            "--metrics-topic",
            cfg.kafka.metrics_topic,
            "--duration",
            str((args.duration or 86_400) + 60),
            "--jobs",
            str(args.jobs),
            "--incident-at",
            str(args.incident_at),
            *[f"--incident={i.kind}@{i.job_index}:{i.onset_s:g}" for i in args.incident or ()],
            *([f"--flink-versions={args.flink_versions}"] if args.flink_versions else []),
            "--checkpoint-interval",
            "5",
            "--checkpoint-timeout",
            "10",
        ],
        # Ctrl-C signals the terminal's whole process group; the demo stops its simulator
        # itself (below), which would otherwise die first, of a KeyboardInterrupt trace.
        preexec_fn=_ignore_sigint,
    )
    log.info(
        "demo: simulator (pid %d) produces %d Flink jobs in real time; checkpoints of job 0 "
        "start expiring %d s in, so a checkpoint_failures alert follows within a minute",
        sim.pid,
        args.jobs,
        args.incident_at,
    )
    return sim


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _recreate_topics(cfg: AppConfig, topics: list[str], partitions: int = 2) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import KafkaError

    from streaming.topics import connect

    admin = connect(KafkaAdminClient, kafka_settings(cfg.kafka).python, client_id="flinkwatch-demo")
    try:
        existing = [t for t in topics if t in set(admin.list_topics())]
        if existing:
            admin.delete_topics(existing)
        deadline = time.monotonic() + 60
        while True:  # deletion is asynchronous: creating too early says "already exists"
            try:
                admin.create_topics(
                    [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in topics]
                )
                return
            except KafkaError as exc:
                if time.monotonic() > deadline:
                    msg = f"could not recreate topics {topics}: {exc}"
                    raise RuntimeError(msg) from exc
                time.sleep(1)
    finally:
        admin.close()


def _incident_kinds() -> frozenset[str]:
    from lab.fleet import INCIDENT_KINDS

    return INCIDENT_KINDS


def _incident(text: str) -> Any:
    """``KIND@JOB:ONSET`` (e.g. ``restart_storm@2:300``) as a simulator Incident."""
    from lab.fleet import Incident

    kind, _, where = text.partition("@")
    job, _, onset = where.partition(":")
    if kind not in _incident_kinds():
        msg = f"unknown incident kind {kind!r} in {text!r}; known: {sorted(_incident_kinds())}"
        raise argparse.ArgumentTypeError(msg)
    try:
        return Incident(kind, int(job), float(onset))  # type: ignore[arg-type]
    except ValueError as exc:
        msg = f"{text!r} is not KIND@JOB:ONSET (job index, onset in seconds)"
        raise argparse.ArgumentTypeError(msg) from exc


def cmd_slack_emulator(args: argparse.Namespace) -> int:
    """Run the local Slack emulator in the foreground."""
    from lab.slack import main as emulator_main

    argv = ["--port", str(args.port), "--token", args.token]
    for channel in args.channel or ():
        argv += ["--channel", channel]
    return emulator_main(argv)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used by the CLI tests)."""
    p = argparse.ArgumentParser(prog="python -m lab", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("simulate", help="produce a simulated Flink fleet into Kafka")
    s.add_argument("--config", help="YAML config (for the Kafka settings)")
    s.add_argument(
        "--bootstrap",
        help="override kafka.bootstrap_servers (default: as for demo)",
    )
    s.add_argument("--logs-topic", help="override kafka.logs_topic")
    s.add_argument("--metrics-topic", help="override kafka.metrics_topic")
    s.add_argument("--jobs", type=int, default=4, help="Flink jobs in the fleet (4)")
    s.add_argument("--tms-per-job", type=int, default=2, help="TaskManagers per job (2)")
    s.add_argument("--duration", type=float, default=600, help="simulated seconds")
    s.add_argument("--realtime", action="store_true", help="pace records at their event time")
    s.add_argument(
        "--incident",
        action="append",
        type=_incident,
        metavar="KIND@JOB:ONSET",
        help="inject an incident, e.g. restart_storm@2:300 (repeatable); kinds: "
        + ", ".join(sorted(_incident_kinds())),
    )
    s.add_argument(
        "--incident-jobs",
        type=int,
        help="jobs whose checkpoints expire (default: 1, or 0 when --incident is given)",
    )
    s.add_argument("--incident-at", type=float, default=30, help="their onset, seconds in")
    s.add_argument(
        "--flink-versions", help="comma-separated, job i runs version i mod len (1.11,1.14,...)"
    )
    for what, default in (("interval", 10.0), ("timeout", 60.0)):
        help_ = f"the jobs' checkpoint {what}, s ({default:g})"
        s.add_argument(f"--checkpoint-{what}", type=float, default=default, help=help_)
    s.add_argument("--seed", type=int, default=7, help="random seed: same seed, same fleet (7)")
    s.add_argument("--start-ms", type=int, help="event time of the first record (default: now)")
    s.set_defaults(func=cmd_simulate)

    d = sub.add_parser("demo", help="simulated fleet + the job on the local stack")
    d.add_argument("--config", help="YAML config (default: the packaged one, local stack)")
    d.add_argument(
        "--bootstrap",
        help="override kafka.bootstrap_servers (default: the config's; the local stack's "
        "127.0.0.1:$FLINKWATCH_KAFKA_PORT when that is set)",
    )
    d.add_argument("--state-dir", default="var/demo", help="alerts, ledger, checkpoints")
    d.add_argument("--jobs", type=int, default=4, help="Flink jobs in the fleet (4)")
    d.add_argument("--incident-at", type=float, default=10, help="job 0's expiries start, s")
    d.add_argument(
        "--incident",
        action="append",
        type=_incident,
        metavar="KIND@JOB:ONSET",
        help="inject this incident instead of job 0's checkpoint expiry (repeatable)",
    )
    d.add_argument("--flink-versions", help="as for simulate")
    d.add_argument("--duration", type=float, help="stop after this many seconds (default: never)")
    d.add_argument("--fresh", action="store_true", help="delete the demo state first")
    d.set_defaults(func=cmd_demo)

    se = sub.add_parser(
        "slack-emulator", help="a local Slack Web API + webhook server (demo, tests, trials)"
    )
    se.add_argument("--port", type=int, default=0, help="port to bind (0: a free one)")
    se.add_argument("--token", default="xoxb-flinkwatch-local", help="accepted bot token")
    se.add_argument(
        "--channel", action="append", help="channel to create (repeatable; default #alerts)"
    )
    se.set_defaults(func=cmd_slack_emulator)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m lab``."""
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
