"""One incident's life, end to end, with timings: Slack with its buttons, and Alertmanager.

``python -m bench.walkthrough`` starts what a team would run: a Kafka broker of its own
(``scripts/stack.sh``), ``flinkwatch run`` as a process, a local Slack (bot mode, the
buttons' endpoint on) and a real Alertmanager (Debian's, ``group_wait: 0s``) that pages
into the same Slack through its own Slack receiver. A small simulated fleet goes to Kafka
in real time with one incident (default: TaskManager 0 of job 0 runs out of heap at
60 s: the JVM dies, the job fails over and runs again). When the incident's Slack message
arrives, the script presses Acknowledge on it, as the person paged would.

It prints the timeline, seconds from the incident's onset: each Slack message and thread
reply, each Alertmanager page (firing and resolved), the press and the message showing
it; and writes it as JSON (``--out``). Detectors close an incident after
``clear_for_s`` without its condition (here 60 s, not the default 300 s, so the resolve
comes within the run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.peer import (
    TOKEN,
    FlinkwatchProcess,
    MetricBoard,
    Producer,
    create_topics,
    flinkwatch_config,
    prometheus_binary,
)
from bench.run import Broker
from detectors import REGISTRY
from lab.fleet import FleetSpec, Incident
from lab.fleet.spec import INCIDENT_KINDS
from lab.procs import free_port
from lab.promserver import AlertmanagerServer
from lab.slack import WEBHOOK_CHANNEL, SlackEmulator

_CHANNEL = "#flink-alerts"
_SECRET = "walkthrough-signing-secret"  # noqa: S105 - the local Slack's, not a secret
_SECRET_ENV = "FLINKWATCH_WALKTHROUGH_SIGNING_SECRET"  # noqa: S105 - a variable's name


@dataclass(frozen=True)
class Moment:
    """One thing that happened, at wall time ``at``."""

    at: float
    where: str  # "slack", "slack thread", "slack chart", "slack update", "alertmanager", "press"
    what: str


class Timeline:
    """What the local Slack receives, in order, with its arrival time."""

    def __init__(self) -> None:
        self.moments: list[Moment] = []
        self.first_post: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def on_message(self, m: dict[str, Any]) -> None:
        """The emulator's callback (posts, thread replies and webhook posts)."""
        now = time.time()
        text = str(m.get("text", "")).split("\n", 1)[0][:160]
        files = m.get("files") or []
        if m.get("channel") == WEBHOOK_CHANNEL:
            where = "alertmanager"
        elif files:
            where = "slack chart"
            sizes = (f"{f.get('title')} ({int(f.get('size') or 0) // 1024} KB)" for f in files)
            text = ", ".join(sizes)
        elif m.get("thread_ts"):
            where = "slack thread"
        else:
            where = "slack"
        with self._lock:
            if where == "slack" and self.first_post is None:
                self.first_post = m
            self.moments.append(Moment(now, where, text))

    def note(self, where: str, what: str, at: float | None = None) -> None:
        """Something the script did or saw itself."""
        with self._lock:
            self.moments.append(Moment(time.time() if at is None else at, where, what))


def _config(workdir: Path, bootstrap: str, topics: tuple[str, str], slack: str, am: str) -> Path:
    cfg = flinkwatch_config(
        bootstrap=bootstrap,
        logs_topic=topics[0],
        metrics_topic=topics[1],
        state_dir=workdir / "state",
        slack_url=slack,
        alertmanager_urls=(am,),
    )
    cfg["slack"] |= {
        "interactivity_port": free_port(),
        "interactivity_host": "127.0.0.1",
        "signing_secret_env": _SECRET_ENV,
    }
    cfg["detectors"] = {
        name: {**cfg["detectors"].get(name, {}), "clear_for_s": 60} for name in REGISTRY
    }
    path = workdir / "flinkwatch.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _press_when_paged(timeline: Timeline, emu: SlackEmulator, stop: threading.Event) -> None:
    """Press Acknowledge on the incident's message once it arrives; note the update."""
    while not stop.is_set() and timeline.first_post is None:
        stop.wait(0.1)
    post = timeline.first_post
    if post is None:
        return
    stop.wait(2.0)  # a person reads before pressing
    timeline.note("press", "Acknowledge pressed")
    status, _ = emu.click(_CHANNEL, str(post["ts"]), "flinkwatch_ack", user="U0ONCALL")
    timeline.note("press", f"the endpoint answered HTTP {status}")
    while not stop.is_set():
        [msg] = [m for m in emu.messages(_CHANNEL) if m["ts"] == post["ts"]]
        if "Acknowledged by" in str(msg.get("blocks", "")):
            timeline.note("slack update", "the message shows Acknowledged by <@U0ONCALL>")
            return
        stop.wait(0.1)


def run(workdir: Path, minutes: float, kind: str, log: Any = print) -> dict[str, Any]:
    """The walk-through; returns the timeline (seconds from the onset) and what ran."""
    onset_s = 60.0
    incident = Incident(kind, 0, onset_s)  # type: ignore[arg-type]
    spec = FleetSpec(jobs=4, tms_per_job=2, incidents=(incident,))
    timeline = Timeline()
    stamp = time.strftime("%Y%m%d%H%M%S")
    topics = (f"walk-{stamp}.logs", f"walk-{stamp}.metrics")
    broker = Broker([], 2).start()
    emu = SlackEmulator(
        token=TOKEN, channels=(_CHANNEL,), on_message=timeline.on_message, signing_secret=_SECRET
    ).start()
    am = AlertmanagerServer(
        prometheus_binary().with_name("alertmanager"),
        workdir / "alertmanager",
        emu.webhook_url,
        _CHANNEL,
        group_wait_s=0.0,
        send_resolved=True,
    ).start()
    stop = threading.Event()
    job = None
    producer = None
    try:
        create_topics(broker.bootstrap, list(topics))
        config = _config(workdir, broker.bootstrap, topics, emu.base_url, f"http://{am.target}")
        port = yaml.safe_load(config.read_text())["slack"]["interactivity_port"]
        emu.set_request_url(f"http://127.0.0.1:{port}/slack/actions")
        os.environ[_SECRET_ENV] = _SECRET
        job = FlinkwatchProcess(config, workdir / "flinkwatch.log", TOKEN)
        job.start()
        log(f"walkthrough: flinkwatch started its queries after {job.wait_started(600):.0f} s")
        start_ms = int(time.time() * 1000)
        producer = Producer(
            spec, start_ms, minutes * 60, broker.bootstrap, *topics, MetricBoard(0)
        ).start()
        onset = start_ms / 1000 + onset_s
        log(f"walkthrough: {kind} on job 0 at +{onset_s:.0f} s; running {minutes:g} min")
        presser = threading.Thread(
            target=_press_when_paged, args=(timeline, emu, stop), daemon=True
        )
        presser.start()
        end = time.time() + minutes * 60
        while time.time() < end and job.alive and producer.error is None:
            time.sleep(1)
        if producer.error is not None:
            msg = f"producing failed: {producer.error}"
            raise RuntimeError(msg)
        if not job.alive:
            msg = f"flinkwatch exited; log:\n{job.tail()}"
            raise RuntimeError(msg)
    finally:
        stop.set()
        if producer is not None:
            producer.stop()
        if job is not None:
            job.stop()
        am.stop()
        emu.stop()
        broker.stop()
    rows = [
        {"s": round(m.at - onset, 1), "where": m.where, "what": m.what}
        for m in sorted(timeline.moments, key=lambda m: m.at)
    ]
    return {"kind": kind, "onset_s": onset_s, "minutes": minutes, "timeline": rows}


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.walkthrough [--minutes M] [--kind KIND] [--out FILE]``."""
    first_line = (__doc__ or "").split("\n", 1)[0]
    p = argparse.ArgumentParser(prog="python -m bench.walkthrough", description=first_line)
    p.add_argument("--minutes", type=float, default=6.0, help="length of the real-time run")
    p.add_argument("--kind", default="tm_heap_oom", choices=sorted(INCIDENT_KINDS))
    p.add_argument("--out", type=Path, help="also write the timeline here as JSON")
    args = p.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="flinkwatch-walk-"))
    result = run(workdir, args.minutes, args.kind, log=lambda s: print(s, file=sys.stderr))
    for row in result["timeline"]:
        print(f"{row['s']:>+8.1f} s  {row['where']:<13} {row['what']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
