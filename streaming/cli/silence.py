"""``flinkwatch silence add|list|expire``: silences without editing the config file.

The matcher syntax and the flags follow ``amtool silence``, which SREs already know:
``flinkwatch silence add job_name=~"pay-.*" detector=checkpoint_creep --duration 1h
--comment "deploy in progress"``. The running job picks a new silence up at its next
micro-batch; the config file's silences keep working beside these.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import os
import sys
import time
from typing import Any

from conf import ConfigError
from conf.silences import parse_duration, parse_matchers
from sinks.silence_store import SilenceNotFoundError, SilenceStore, StoredSilence
from streaming.cli.args import add_output_format, config_of


def add_arguments(s: argparse.ArgumentParser) -> None:
    """The ``silence`` command's three subcommands."""
    ssub = s.add_subparsers(dest="silence_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", help="YAML config (for output.state_dir)")
        p.add_argument("--state-dir", help="override output.state_dir")
        add_output_format(p)

    a = ssub.add_parser("add", help="silence the alerts the matchers cover")
    a.add_argument(
        "matchers",
        nargs="+",
        help="name=value or name=~regex (whole value); names: detector, cluster, job_id, "
        'job_name, tm_id, host, severity; e.g. job_name=~"pay-.*". tm_id=<one id> covers '
        "that TaskManager however it is spelled (its logs' localhost:40003-6cf67b, "
        "Prometheus' localhost:40003_6cf67b); a tm_id regex matches the alert's spelling",
    )
    a.add_argument("-c", "--comment", required=True, help="why (shown to whoever is on call)")
    a.add_argument("-d", "--duration", default="1h", help="how long: 1h, 30m, 4h, 2d (1h)")
    a.add_argument("--start", help="from (RFC 3339, e.g. 2026-11-23T22:00:00Z; default: now)")
    a.add_argument("--until", help="to (RFC 3339); instead of --duration")
    a.add_argument("-a", "--author", help="who (default: the user name)")
    common(a)
    a.set_defaults(func=cmd_silence_add)

    ls = ssub.add_parser("list", help="silences not over yet (--all: expired ones too)")
    ls.add_argument("--all", action="store_true", help="expired silences too")
    common(ls)
    ls.set_defaults(func=cmd_silence_list)

    ex = ssub.add_parser("expire", help="end silences now")
    ex.add_argument("ids", nargs="+", help="silence ids (silence list)")
    common(ex)
    ex.set_defaults(func=cmd_silence_expire)


def _store(args: argparse.Namespace) -> SilenceStore:
    cfg = config_of(args)
    return SilenceStore(cfg.output.silences_path)


def _open(args: argparse.Namespace, verb: str) -> SilenceStore | None:
    """The job's silence store; ``None`` (said on stderr) if the config cannot be read."""
    try:
        return _store(args)
    except ConfigError as exc:
        print(f"silence {verb}: {exc}", file=sys.stderr)
        return None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _instant(text: str, flag: str) -> int:
    try:
        at = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        msg = f"{flag} {text!r}: not an RFC 3339 time (2026-11-23T22:00:00Z)"
        raise ValueError(msg) from exc
    if at.tzinfo is None:
        msg = f"{flag} {text!r}: give a time zone (Z or +01:00)"
        raise ValueError(msg)
    return int(at.timestamp() * 1000)


def _author(given: str | None) -> str:
    if given:
        return given
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's random uid)
        return os.environ.get("USER", "unknown")


def cmd_silence_add(args: argparse.Namespace) -> int:
    """Store a silence; print its id."""
    now = _now_ms()
    try:
        matchers = parse_matchers(args.matchers)
        starts = _instant(args.start, "--start") if args.start else now
        if args.until:
            ends = _instant(args.until, "--until")
        else:
            ends = starts + int(parse_duration(args.duration).total_seconds() * 1000)
        store = _store(args)
    except (ValueError, ConfigError) as exc:
        print(f"silence add: {exc}", file=sys.stderr)
        return 2
    try:
        s = store.add(
            matchers, tuple(args.matchers), starts, ends, args.comment, _author(args.author), now
        )
    except ValueError as exc:
        print(f"silence add: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    if args.output_format == "json":
        print(json.dumps(_as_json(s, now), indent=2))
    else:
        print(s.id)
        print(f"until {_when(s.ends_ms)}: {' '.join(s.given)}", file=sys.stderr)
    return 0


def cmd_silence_list(args: argparse.Namespace) -> int:
    """Print the silences (not over yet, or all)."""
    now = _now_ms()
    store = _open(args, "list")
    if store is None:
        return 2
    try:
        rows = store.listing(now, expired=args.all)
    finally:
        store.close()
    if args.output_format == "json":
        print(json.dumps([_as_json(s, now) for s in rows], indent=2))
        return 0
    if not rows:
        print("no silences", file=sys.stderr)
        return 0
    table = [
        (
            s.id,
            s.state(now),
            _when(s.starts_ms),
            _when(s.ends_ms),
            s.created_by,
            " ".join(s.given),
            s.comment,
        )
        for s in rows
    ]
    head = ("ID", "STATE", "STARTS", "ENDS", "CREATED BY", "MATCHERS", "COMMENT")
    widths = [max(len(str(r[i])) for r in [head, *table]) for i in range(len(head) - 1)]
    for r in [head, *table]:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=False)) + "  " + r[-1])
    return 0


def cmd_silence_expire(args: argparse.Namespace) -> int:
    """End silences now; a wrong id is an error (exit 1), the others still expire."""
    now = _now_ms()
    store = _open(args, "expire")
    if store is None:
        return 2
    failed = 0
    try:
        for silence_id in args.ids:
            try:
                s = store.expire(silence_id, now)
            except SilenceNotFoundError as exc:
                print(f"silence expire: {exc}", file=sys.stderr)
                failed += 1
                continue
            print(f"{s.id} expired ({' '.join(s.given)})", file=sys.stderr)
    finally:
        store.close()
    return 1 if failed else 0


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _as_json(s: StoredSilence, now_ms: int) -> dict[str, Any]:
    return {
        "id": s.id,
        "state": s.state(now_ms),
        "matchers": list(s.given),
        "starts_at": _when(s.starts_ms),
        "ends_at": _when(s.ends_ms),
        "comment": s.comment,
        "created_by": s.created_by,
        "created_at": _when(s.created_ms),
        "expired_at": None if s.expired_ms is None else _when(s.expired_ms),
    }
