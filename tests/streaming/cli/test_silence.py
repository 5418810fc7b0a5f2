"""flinkwatch silence add|list|expire, and the running job honouring it at its next batch."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from conf import AppConfig
from sinks import AlertLedger, DeliverySink, Transition
from sinks.dispatch import Dispatcher
from sinks.silence_store import SilenceStore
from streaming.cli import main
from streaming.delivery import AlertDelivery, Outputs, PipelineStats


def _json(capsys: Any) -> Any:
    return json.loads(capsys.readouterr().out)


def test_add_list_and_expire_from_the_command_line(tmp_path: Path, capsys: Any) -> None:
    state = ["--state-dir", str(tmp_path)]
    assert (
        main(
            [
                "silence",
                "add",
                'job_name=~"pay-.*"',
                "-c",
                "deploy",
                "-d",
                "4h",
                "-a",
                "ana",
                *state,
            ]
        )
        == 0
    )
    sid = capsys.readouterr().out.strip()
    assert sid.startswith("s-")
    assert main(["silence", "list", "-o", "json", *state]) == 0
    (listed,) = _json(capsys)
    assert listed["id"] == sid and listed["state"] == "active"
    assert listed["matchers"] == ['job_name=~"pay-.*"'] and listed["created_by"] == "ana"
    assert main(["silence", "expire", sid, "s-nothere", *state]) == 1  # one unknown id
    assert "s-nothere" in capsys.readouterr().err
    assert main(["silence", "list", "-o", "json", *state]) == 0
    assert _json(capsys) == []
    assert main(["silence", "list", "--all", "-o", "json", *state]) == 0
    (gone,) = _json(capsys)
    assert gone["state"] == "expired" and gone["expired_at"] is not None


def test_a_bad_matcher_or_time_is_refused_naming_it(tmp_path: Path, capsys: Any) -> None:
    state = ["--state-dir", str(tmp_path)]
    assert main(["silence", "add", "team=payments", "-c", "x", *state]) == 2
    assert "no label 'team'" in capsys.readouterr().err
    assert main(["silence", "add", "job_id=a", "-c", "x", "--until", "tomorrow", *state]) == 2
    assert "--until 'tomorrow'" in capsys.readouterr().err
    assert main(["silence", "list", *state]) == 0
    assert "no silences" in capsys.readouterr().err


class Slack(DeliverySink):
    name = "slack"
    notifies = True

    def send(self, t: Transition) -> None:  # never called: nothing is drained here
        raise AssertionError(t.key)


class Batch:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def collect(self) -> list[dict[str, Any]]:
        return self.rows


def _row(job: str, t: int) -> dict[str, Any]:
    return {
        "kind": "alert",
        "alert_id": f"id-{job}",
        "detector": "checkpoint_failures",
        "entity": f"job:{job}",
        "status": "firing",
        "severity": "warning",
        "event_ms": t,
        "job_id": job,
        "job_name": None,
        "tm_id": None,
        "host": None,
        "summary": "s",
        "evidence": "{}",
        "data": None,
    }


def test_a_silence_added_while_the_job_runs_withholds_the_next_batchs_page(tmp_path: Path) -> None:
    cfg = AppConfig.model_validate({"output": {"state_dir": str(tmp_path)}})
    ledger = AlertLedger(cfg.output.ledger_path)
    outputs = Outputs(
        ledger=ledger,
        dispatcher=Dispatcher(ledger, [Slack()]),  # not started: deliveries stay recorded
        silences=SilenceStore(cfg.output.silences_path),
    )
    delivery = AlertDelivery(outputs, PipelineStats(), cfg)

    def deliver(batch: Batch, batch_id: int) -> None:
        # Spark calls foreachBatch on a thread of its own, not the one that built outputs.
        worker = threading.Thread(target=delivery, args=(batch, batch_id))
        worker.start()
        worker.join()

    now = int(time.time() * 1000)
    deliver(Batch([_row("a1", now)]), 0)
    # The SRE silences job a2 from another shell while the job runs.
    assert main(["silence", "add", "job_id=a2", "-c", "noisy", "--state-dir", str(tmp_path)]) == 0
    # Recorded after the silence was added, though the events happened a little before it
    # (as a page does after its record's trip through Kafka and Spark): no page for a2.
    deliver(Batch([_row("a2", now), _row("a3", now)]), 1)
    states = {d.key: d.state for d in ledger.deliveries(None) if d.sink == "slack"}
    assert states == {
        "id-a1:firing": "pending",
        "id-a2:firing": "silenced",
        "id-a3:firing": "pending",
    }
