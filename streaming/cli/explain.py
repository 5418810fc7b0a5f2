"""``flinkwatch explain``: where each detector stands for a job, a TaskManager or the cluster.

Two sources, one answer (:mod:`streaming.explain`): a replay's end state (``--logs`` and
``--metrics``, the replay's parser and detectors over files) or the running job's, read
from its ``/explain`` endpoint (``--url``) with the credentials a scrape of its
``/metrics`` uses: the user ``metrics.basic_auth_username`` of ``--config``, the password
in the variable ``metrics.basic_auth_password_env`` names.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import shutil
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conf import AppConfig, FlinkwatchError
from sinks import DeadLetterFileSink
from sinks.http_post import redact_url
from streaming.cli.args import add_output_format, load_or_exit, print_json
from streaming.delivery import PipelineStats
from streaming.explain import Asked, Explanation, explain, render
from streaming.replay import replay
from streaming.replay_session import input_bytes, replay_session, short_input
from streaming.runtime import Runtime
from streaming.sources import file_records, stage_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("flinkwatch")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``flinkwatch explain``'s options."""
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--job", metavar="ID|NAME", help="a job, by its id or its name")
    who.add_argument("--tm", metavar="ID", help="a TaskManager, by its id in any spelling")
    who.add_argument("--cluster", action="store_true", help="the cluster (its JobManager)")
    p.add_argument("--logs", nargs="+", default=[], help="replay these log files or directories")
    p.add_argument("--metrics", nargs="+", default=[], help="replay these metric files")
    p.add_argument(
        "--url", help="ask the running job instead: its metrics endpoint, https://host:9250"
    )
    p.add_argument("--config", help="YAML config (thresholds of a replay; a scrape's credentials)")
    p.add_argument("--cacert", help="the CA file the endpoint's certificate is checked against")
    p.add_argument("--cert", help="client certificate, for an endpoint with mutual TLS")
    p.add_argument("--key", help="the client certificate's key")
    add_output_format(p)
    p.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    """Each detector's standing for the entity: from a replay's end state or the running job.

    Exit 1 when nothing matches a job's name (or the job cannot be asked), 2 for a
    usage error.
    """
    cfg = load_or_exit(args.config)
    asked = Asked(job=args.job, tm=args.tm, cluster=args.cluster)
    if bool(args.url) == bool(args.logs or args.metrics):
        log.error("explain needs --url (the running job) or --logs/--metrics (a replay)")
        return 2
    try:
        expl = ask(args, cfg, asked) if args.url else replayed(args, cfg, asked)
    except ExplainError as exc:
        log.error("%s", exc)
        return 1
    if expl is None:
        return 1
    if args.output_format == "json":
        print_json(expl.model_dump(mode="json"))
    else:
        print(render(expl))
    return 0 if expl.entities else 1


class ExplainError(FlinkwatchError):
    """The running job could not be asked; the message says why."""


def replayed(args: argparse.Namespace, cfg: AppConfig, asked: Asked) -> Explanation | None:
    """The explanation of a replay's end state (``flinkwatch replay``'s run, no output)."""
    work = Path(tempfile.mkdtemp(prefix="flinkwatch-explain-"))
    try:
        try:
            logs_dir = stage_files(args.logs or [], work / "logs")
            metrics_dir = stage_files(args.metrics or [], work / "metrics")
        except FileNotFoundError as exc:
            log.error("%s", exc)
            return None
        spark, _ = replay_session(cfg, logs_dir, metrics_dir)
        saved = end_states(spark, logs_dir, metrics_dir, cfg, work, (asked,))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return explain(asked, saved, cfg)


def end_states(
    spark: SparkSession,
    logs_dir: Path,
    metrics_dir: Path,
    cfg: AppConfig,
    work: Path,
    questions: tuple[Asked, ...],
) -> dict[str, str]:
    """The saved values of the entities ``questions`` ask about, at the end of a replay.

    The replay's alerts go to a ledger and file under ``work``, which nobody reads.
    """
    runtime = Runtime(
        cfg, replay=True, ledger_path=work / "ledger.sqlite", alerts_path=work / "alerts.jsonl"
    )
    try:
        return replay(
            file_records(spark, logs_dir, kind="log", stream=False),
            file_records(spark, metrics_dir, kind="metric", stream=False),
            cfg,
            runtime.outputs,
            DeadLetterFileSink(work / "deadletters"),
            PipelineStats(),
            explain=questions,
            here=short_input(input_bytes(logs_dir, metrics_dir)),
        )
    finally:
        runtime.close()


def ask(args: argparse.Namespace, cfg: AppConfig, asked: Asked) -> Explanation:
    """The running job's explanation, from its ``/explain`` endpoint.

    Raises:
        ExplainError: the endpoint cannot be reached, refuses the credentials, or cannot
            read the detect query's state now.
    """
    url = _explain_url(args.url, asked)
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310 - _explain_url: http(s) only
    m = cfg.metrics
    if m.basic_auth_username is not None:
        password = os.environ.get(m.basic_auth_password_env, "").strip()
        if not password:
            msg = f"metrics.basic_auth_username is set but ${m.basic_auth_password_env} is empty"
            raise ExplainError(msg)
        token = base64.b64encode(f"{m.basic_auth_username}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context(cafile=args.cacert)
        if args.cert:
            context.load_cert_chain(args.cert, args.key)
    try:
        with urllib.request.urlopen(request, timeout=60, context=context) as answer:  # noqa: S310 - http(s) only, checked
            body: Any = json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        said = _error_of(exc)
        status = f"{exc.code} {exc.reason}"
        # A plain-text refusal (401) names its status itself.
        told = said if said.startswith(status) else status + (f": {said}" if said else "")
        msg = f"{redact_url(url)}: {told}"
        raise ExplainError(msg) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        msg = f"{redact_url(url)}: {exc}"
        raise ExplainError(msg) from exc
    return Explanation.model_validate(body)


def _explain_url(base: str, asked: Asked) -> str:
    """``<base>/explain?...``; ``base`` may end in ``/metrics`` (a scrape's URL)."""
    parts = urllib.parse.urlsplit(base)
    if parts.scheme not in ("http", "https"):
        msg = f"--url {base}: not an http(s) URL"
        raise ExplainError(msg)
    path = parts.path.rstrip("/").removesuffix("/metrics") + "/explain"
    if asked.cluster:
        query = "cluster=1"
    else:
        query = urllib.parse.urlencode({"job": asked.job} if asked.job else {"tm": asked.tm})
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, query, ""))


def _error_of(exc: urllib.error.HTTPError) -> str:
    """What the endpoint said of its refusal (its JSON ``error``, or its text)."""
    try:
        raw = exc.read().decode("utf-8", "replace")
    except OSError:
        return ""
    try:
        return str(json.loads(raw).get("error") or "")
    except (ValueError, AttributeError):
        return raw.strip()
