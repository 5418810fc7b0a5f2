"""``flinkwatch config check``: validate a config file without running anything."""

from __future__ import annotations

import argparse
import sys

from conf import ConfigError, load_config
from streaming.cli.args import add_output_format, print_json


def add_arguments(c: argparse.ArgumentParser) -> None:
    """``flinkwatch config check``."""
    csub = c.add_subparsers(dest="config_command", required=True)
    cc = csub.add_parser("check", help="validate a config file")
    cc.add_argument("file", help="the YAML file")
    cc.add_argument(
        "--sample",
        action="append",
        metavar="NAME=VALUE",
        help="a sample job (job_name=pay-etl, cluster=prod, ...): print the Slack route each "
        "detector's incidents about it would take",
    )
    add_output_format(cc)
    cc.set_defaults(func=cmd_config_check)


def cmd_config_check(args: argparse.Namespace) -> int:
    """Validate a config file without running anything."""
    as_json = args.output_format == "json"
    try:
        cfg = load_config(args.file)
    except ConfigError as exc:
        if as_json:
            # On stdout, like the success: a script reads one place and the exit code.
            print_json(
                {"ok": False, "file": args.file, "fields": list(exc.fields), "message": str(exc)}
            )
        else:
            print(f"INVALID {exc}", file=sys.stderr)
        return 1
    enabled = [n for n, p in cfg.detector_params().items() if p.enabled]
    try:
        sample = _sample_labels(args.sample or [])
    except ValueError as exc:
        print(f"config check: {exc}", file=sys.stderr)
        return 2
    # Where each detector's and rule's incidents go: a route may name a rule.
    paging = [n for n, p in cfg.resolver().base.items() if p.enabled]
    routes = cfg.slack.route_table(paging, sample, cfg.cluster) if sample else []
    if as_json:
        out: dict[str, object] = {"ok": True, "file": args.file, "detectors_enabled": enabled}
        out["rules"] = [
            {"name": r.name, "kind": r.kind, "enabled": r.enabled, "line": r.describe()}
            for r in cfg.rules
        ]
        if sample:
            out["routes"] = [
                {"detector": d, "severity": sev.value, "route": route, "channel": channel}
                for d, sev, route, channel in routes
            ]
        print_json(out)
        return 0
    print(f"OK {args.file}: detectors enabled: {', '.join(enabled) or 'none'}")
    if cfg.rules:
        print(f"rules ({len(cfg.rules)}):")
        for rule in cfg.rules:
            print(f"  {rule.describe()}")
    if routes:
        print(f"slack routes for {' '.join(args.sample)}:")
        width = max(len(d) for d, *_ in routes)
        for d, sev, route, channel in routes:
            print(f"  {d:<{width}}  {sev.value:<8}  {channel}  ({route})")
    return 0


#: The labels ``config check --sample`` takes.
SAMPLE_LABELS = ("cluster", "job_name", "job_id", "tm_id", "host")


def _sample_labels(texts: list[str]) -> dict[str, str]:
    """``--sample job_name=pay-etl`` (repeated) → the sample's labels."""
    labels: dict[str, str] = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or name not in SAMPLE_LABELS:
            msg = f"--sample {text!r}: give name=value, name one of {', '.join(SAMPLE_LABELS)}"
            raise ValueError(msg)
        labels[name] = value
    return labels
