"""``flinkwatch deliveries list|resend``: the alert ledger's deliveries, for an operator."""

from __future__ import annotations

import argparse
import sys

from sinks import AlertLedger
from streaming.cli.args import add_output_format, config_of, print_json


def _open_ledger(args: argparse.Namespace) -> AlertLedger | None:
    """The job's alert ledger (``<output.state_dir>/ledger.sqlite``); None if there is none."""
    path = config_of(args).output.ledger_path
    if not path.is_file():
        # Opening would create an empty ledger: a wrong --config must not look like "all fine".
        print(f"no ledger at {path} (check --config / --state-dir)", file=sys.stderr)
        return None
    return AlertLedger(path)


def cmd_deliveries_list(args: argparse.Namespace) -> int:
    """Print the ledger's deliveries in one state (or all), oldest first."""
    ledger = _open_ledger(args)
    if ledger is None:
        if args.output_format == "json":
            # A script reads the array: no ledger yet is nothing delivered (the note above
            # is on stderr, for a person who mistyped --config).
            print_json([])
            return 0
        return 2
    try:
        rows = ledger.deliveries(None if args.state == "all" else [args.state])
    finally:
        ledger.close()
    if args.output_format == "json":
        print_json(
            [
                {
                    "seq": d.seq,
                    "sink": d.sink,
                    "state": d.state,
                    "attempts": d.attempts,
                    "error": d.error,
                    "updated_ms": d.updated_ms,
                    "transition": d.key,
                    "alert": d.alert.model_dump(mode="json"),
                }
                for d in rows
            ]
        )
        return 0
    if not rows:
        print(f"no deliveries ({args.state})", file=sys.stderr)
        return 0
    w_sink = max(len("sink"), *(len(d.sink) for d in rows))
    w_key = max(len("transition"), *(len(d.key) for d in rows))
    head = f"{'seq':>6}  {'sink':<{w_sink}}  {'state':<9}  attempts  {'transition':<{w_key}}"
    print(f"{head}  summary")
    for d in rows:
        line = f"{d.seq:>6}  {d.sink:<{w_sink}}  {d.state:<9}  {d.attempts:>8}  {d.key:<{w_key}}"
        print(f"{line}  {d.alert.summary}")
        if d.error:
            print(f"{'':>6}  error: {d.error}")
    return 0


def cmd_deliveries_resend(args: argparse.Namespace) -> int:
    """Move failed deliveries back to pending, so they are sent again."""
    if bool(args.seq) == args.all_failed:
        args.usage_error("give SEQ... or --all-failed")
    ledger = _open_ledger(args)
    if ledger is None:
        return 2
    try:
        moved = ledger.resend(None if args.all_failed else args.seq)
    finally:
        ledger.close()
    for seq, sink in moved:
        print(f"seq {seq} ({sink}): failed -> pending")
    done = {seq for seq, _ in moved}
    missing = [] if args.all_failed else [q for q in dict.fromkeys(args.seq) if q not in done]
    for seq in missing:
        print(f"seq {seq}: no failed delivery (see `flinkwatch deliveries list`)", file=sys.stderr)
    if moved:
        print(
            "queued: a running job sends them in order (Slack, Alertmanager and webhooks "
            "within 30 s, the alert file at its next batch); otherwise the next start does",
            file=sys.stderr,
        )
    return 1 if missing else 0


def add_arguments(dl: argparse.ArgumentParser) -> None:
    """``flinkwatch deliveries list|resend``: the alert ledger, for an operator."""
    dsub = dl.add_subparsers(dest="deliveries_command", required=True)
    # allow_abbrev off: `resend --state x` must not pass for --state-dir.
    ls = dsub.add_parser("list", help="print deliveries from the ledger", allow_abbrev=False)
    states = ["failed", "pending", "sending", "stale", "all"]
    ls.add_argument("--state", choices=states, default="failed", help="which (default: failed)")
    add_output_format(ls)
    ls.set_defaults(func=cmd_deliveries_list)
    rs = dsub.add_parser(
        "resend", help="move failed deliveries back to pending", allow_abbrev=False
    )
    rs.add_argument("seq", nargs="*", type=int, metavar="SEQ", help="seq numbers, as listed")
    rs.add_argument("--all-failed", action="store_true", help="every failed delivery")
    rs.set_defaults(func=cmd_deliveries_resend, usage_error=rs.error)
    for cmd in (ls, rs):
        cmd.add_argument("--config", help="YAML config; the ledger is in its output.state_dir")
        cmd.add_argument("--state-dir", help="override output.state_dir")
