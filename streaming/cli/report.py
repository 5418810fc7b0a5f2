"""``flinkwatch report``: the weekly picture, from the alert ledger and the alert file.

``flinkwatch report --since 7d --out reports/`` writes ``reports/report.json`` (the
numbers, ``"schema": 1``) and ``reports/report.html`` (one page with its charts inlined,
to mail), and prints a summary. The rules of the count are in :mod:`sinks.reports.weekly`.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

from sinks import AlertLedger
from sinks.reports.weekly import Record, Sources, build_report, parse_since, summary_lines
from sinks.reports.weekly_html import render_html
from sinks.reports.weekly_input import LedgerNoise, ledger_records, merge, read_alert_file
from streaming.cli.args import config_of


def add_arguments(r: argparse.ArgumentParser) -> None:
    """The ``report`` command."""
    r.allow_abbrev = False
    r.add_argument(
        "--since",
        default="7d",
        help="the window's start: back from now (7d, 24h, 90m, 1h30m) or an ISO date or time "
        "(2026-11-16, 2026-11-16T08:00:00Z; UTC when no zone is given); default 7d",
    )
    r.add_argument("--config", help="YAML config; the ledger is in its output.state_dir")
    r.add_argument("--state-dir", help="override output.state_dir")
    r.add_argument(
        "--alerts",
        action="append",
        default=[],
        metavar="FILE",
        help="an alert file (JSON lines) to read too, or instead of a missing ledger; "
        "repeat for rotated files (alerts.jsonl.1 ...)",
    )
    r.add_argument("--out", required=True, metavar="DIR", help="where report.json and .html go")
    r.set_defaults(func=cmd_report)


def _now_ms() -> int:
    return int(time.time() * 1000)


def cmd_report(args: argparse.Namespace) -> int:
    """Read the ledger and the alert files, write the report, print its summary."""
    now = _now_ms()
    try:
        since = parse_since(args.since, now)
    except ValueError as exc:
        print(f"report: --since {exc}", file=sys.stderr)
        return 2
    ledger_path = config_of(args).output.ledger_path
    files = [Path(p) for p in args.alerts]
    for p in files:
        if not p.is_file():
            print(f"report: --alerts {p}: no such file", file=sys.stderr)
            return 2
    if not ledger_path.is_file():
        # Opening would create an empty ledger: a wrong --config must not look like a quiet week.
        if not files:
            print(
                f"report: no ledger at {ledger_path} (check --config / --state-dir) and no "
                "--alerts FILE given: nothing to report from",
                file=sys.stderr,
            )
            return 2
        print(f"report: no ledger at {ledger_path}: noise is not known", file=sys.stderr)
    sources: list[list[Record]] = []
    unreadable = 0
    ledger = None
    reading = ledger_path
    try:
        if ledger_path.is_file():
            ledger = AlertLedger(ledger_path)
            sources.append(ledger_records(ledger))
        for p in files:
            reading = p
            records, bad = read_alert_file(p)
            sources.append(records)
            unreadable += bad
        merged, duplicates = merge(*sources)
        reading = ledger_path  # the noise presses are looked up as the report is built
        report = build_report(
            merged,
            since_ms=since,
            now_ms=now,
            noise=LedgerNoise(ledger) if ledger is not None else None,
            sources=Sources(
                ledger=str(ledger_path) if ledger is not None else None,
                alert_files=tuple(str(p) for p in files),
                read=sum(len(s) for s in sources),
                duplicates=duplicates,
                unreadable_lines=unreadable,
            ),
        )
    except (OSError, sqlite3.Error) as exc:
        print(f"report: cannot read {reading}: {exc}", file=sys.stderr)
        return 1
    finally:
        if ledger is not None:
            ledger.close()
    out = Path(args.out)
    paths = (out / "report.json", out / "report.html")
    try:
        out.mkdir(parents=True, exist_ok=True)
        paths[0].write_text(report.to_json(), encoding="utf-8")
        paths[1].write_text(render_html(report), encoding="utf-8")
    except OSError as exc:
        print(f"report: cannot write to {out}: {exc}", file=sys.stderr)
        return 1
    for line in summary_lines(report):
        print(line)
    for p in paths:
        print(f"wrote {p}")
    return 0
