"""``flinkwatch parse``: how records parse, one JSON object per record."""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
from pathlib import Path

from streaming.cli.args import load_or_exit
from streaming.events import parse_limits
from streaming.metric_parsing import parse_metrics
from streaming.parsing import parse_logs
from streaming.replay_session import replay_session
from streaming.sources import file_records, given_name, stage_files

log = logging.getLogger("flinkwatch")


def add_arguments(pa: argparse.ArgumentParser) -> None:
    """``flinkwatch parse``'s options."""
    pa.add_argument("paths", nargs="+", help="files or directories")
    pa.add_argument("--kind", choices=["log", "metric"], default="log", help="what the files hold")
    pa.add_argument("--config", help="YAML config (for the time zone and limits)")
    pa.set_defaults(func=cmd_parse)


def cmd_parse(args: argparse.Namespace) -> int:
    """One JSON object per input record: the parsed event, or why it did not parse."""
    cfg = load_or_exit(args.config)
    work = Path(tempfile.mkdtemp(prefix="flinkwatch-parse-"))
    try:
        staged = stage_files(args.paths, work / "in")
        # A replay's session for these files (its time zone the config's); two partitions
        # for the sort, as the detect state's count is nothing to a parse.
        spark, _ = replay_session(cfg, staged, partitions=2)
        records = file_records(spark, staged, kind=args.kind, stream=False)
        lim = parse_limits(cfg)
        if args.kind == "metric":
            parsed = parse_metrics(records, lim, names=cfg.parsing.metric_names)
        else:
            parsed = parse_logs(records, lim)
        df = parsed.orderBy("topic", "offset")
        for row in df.toLocalIterator():
            rec = {k: v for k, v in row.asDict().items() if v is not None}
            if "event_time" in rec:
                rec["event_time"] = rec["event_time"].strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            rec["topic"] = given_name(rec.get("topic", ""))
            rec.pop("kafka_ts", None)
            rec.pop("partition", None)
            print(json.dumps(rec, default=str))
    except FileNotFoundError as exc:
        log.error("%s", exc)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0
