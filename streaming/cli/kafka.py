"""``flinkwatch kafka create-topics``: create topics if missing (used by scripts/stack.sh)."""

from __future__ import annotations

import argparse
import logging
import sys

from kafka.admin import KafkaAdminClient

from conf import ConfigError
from conf.kafka_client import kafka_settings
from streaming.cli.args import load_or_exit, with_overrides
from streaming.topics import KafkaConnectError, KafkaTopicError, connect, create_topics, topic_spec

log = logging.getLogger("flinkwatch")


def add_arguments(k: argparse.ArgumentParser) -> None:
    """``flinkwatch kafka create-topics``."""
    ksub = k.add_subparsers(dest="kafka_command", required=True)
    kt = ksub.add_parser("create-topics", help="create topics if missing")
    kt.add_argument("--config", help="YAML config (for the Kafka connection and security)")
    kt.add_argument("--bootstrap", help="override kafka.bootstrap_servers")
    kt.add_argument("--partitions", type=int, default=2, help="partitions per new topic (2)")
    kt.add_argument(
        "--replication-factor",
        type=int,
        help="replicas per new topic (default: the brokers' default.replication.factor)",
    )
    kt.add_argument("topics", nargs="+", help="topic names")
    kt.set_defaults(func=cmd_kafka_create_topics)


def cmd_kafka_create_topics(args: argparse.Namespace) -> int:
    """Create topics if missing (used by scripts/stack.sh)."""
    cfg = load_or_exit(args.config)
    if args.bootstrap:
        cfg = with_overrides(cfg, {"kafka": {"bootstrap_servers": args.bootstrap}})
    try:
        # The broker may still be starting: connect() waits for it.
        admin = connect(
            KafkaAdminClient, kafka_settings(cfg.kafka).python, client_id="flinkwatch-admin"
        )
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
    except KafkaConnectError as exc:
        log.error("%s", exc)
        return 1
    spec = topic_spec(args.partitions, args.replication_factor)
    try:
        created = create_topics(admin, dict.fromkeys(args.topics, spec))
    except KafkaTopicError as exc:
        log.error("%s", exc)
        return 1
    finally:
        admin.close()
    for t in args.topics:
        print(f"topic {t}: {'created' if t in created else 'exists'}", file=sys.stderr)
    return 0
