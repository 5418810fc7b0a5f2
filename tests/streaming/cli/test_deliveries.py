"""``flinkwatch deliveries``: the ledger's deliveries by state; failed ones sent again."""

from __future__ import annotations

import json

import pytest

from streaming.cli import main


def _ledger_with_failures(tmp_path):
    from detectors import Alert, AlertStatus, Severity
    from sinks import AlertLedger, DeliverySink, PermanentDeliveryError
    from sinks.dispatch import deliver

    class Refusing(DeliverySink):
        name = "slack"
        notifies = True

        def send(self, t):
            if t.alert.alert_id != "ok":
                raise PermanentDeliveryError("chat_postMessage: HTTP 200 channel_not_found")

    def alert(alert_id: str) -> Alert:
        return Alert(
            alert_id=alert_id,
            detector="checkpoint_failures",
            entity="job:7f",
            status=AlertStatus.FIRING,
            severity=Severity.WARNING,
            event_time_ms=1_700_000_000_000,
            summary=f"3 checkpoints of {alert_id} expired",
        )

    state = tmp_path / "state"
    conf = tmp_path / "flinkwatch.yaml"
    conf.write_text(f"output:\n  state_dir: {state}\n")
    ledger = AlertLedger(state / "ledger.sqlite")
    sink = Refusing()
    ledger.record(0, [alert("lost1"), alert("ok"), alert("lost2")], [sink])
    deliver(ledger, sink)
    return conf, ledger


def test_deliveries_list_shows_the_ledger_by_state(tmp_path, capsys) -> None:
    conf, _ = _ledger_with_failures(tmp_path)
    assert main(["deliveries", "list", "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["seq", "sink", "state", "attempts", "transition", "summary"]
    assert "lost1:firing" in out and "lost2:firing" in out and "ok:firing" not in out
    assert out.count("error: chat_postMessage: HTTP 200 channel_not_found") == 2
    assert "3 checkpoints of lost1 expired" in out
    assert main(["deliveries", "list", "--state", "all", "--config", str(conf)]) == 0
    assert "ok:firing" in capsys.readouterr().out
    assert main(["deliveries", "list", "--state", "pending", "--config", str(conf)]) == 0
    assert "no deliveries" in capsys.readouterr().err


def test_deliveries_list_in_json_is_an_array_of_one_object_per_delivery(tmp_path, capsys) -> None:
    conf, _ = _ledger_with_failures(tmp_path)
    assert main(["deliveries", "list", "-o", "json", "--config", str(conf)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["seq"], r["sink"], r["state"], r["transition"]) for r in rows] == [
        (1, "slack", "failed", "lost1:firing"),
        (3, "slack", "failed", "lost2:firing"),
    ]
    assert {r["error"] for r in rows} == {"chat_postMessage: HTTP 200 channel_not_found"}
    assert rows[0]["alert"]["summary"] == "3 checkpoints of lost1 expired"
    assert rows[0]["alert"]["status"] == "firing" and rows[0]["attempts"] >= 1
    argv = ["deliveries", "list", "--state", "pending", "-o", "json", "--config", str(conf)]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_deliveries_resend_puts_failed_ones_back_in_the_queue(tmp_path, capsys) -> None:
    conf, ledger = _ledger_with_failures(tmp_path)
    assert main(["deliveries", "resend", "1", "2", "--config", str(conf)]) == 1
    captured = capsys.readouterr()
    assert "seq 1 (slack): failed -> pending" in captured.out
    assert "seq 2: no failed delivery" in captured.err  # delivered: nothing to do
    assert ledger.counts()[("slack", "pending")] == 1
    assert main(["deliveries", "resend", "--all-failed", "--config", str(conf)]) == 0
    assert "seq 3 (slack): failed -> pending" in capsys.readouterr().out
    assert ledger.counts()[("slack", "pending")] == 2
    assert ("slack", "failed") not in ledger.counts()


def test_deliveries_needs_a_ledger_and_one_way_of_choosing(tmp_path, capsys) -> None:
    conf = tmp_path / "flinkwatch.yaml"
    conf.write_text(f"output:\n  state_dir: {tmp_path / 'nothing'}\n")
    assert main(["deliveries", "list", "--config", str(conf)]) == 2
    assert "no ledger at" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()  # looking does not create one
    for argv in (["deliveries", "resend"], ["deliveries", "resend", "1", "--all-failed"]):
        with pytest.raises(SystemExit):
            main([*argv, "--config", str(conf)])
        assert "give SEQ... or --all-failed" in capsys.readouterr().err


def test_deliveries_list_in_json_without_a_ledger_is_an_empty_array(tmp_path, capsys) -> None:
    # Scripts and jq read the array: nothing recorded yet is nothing delivered, not an error.
    conf = tmp_path / "flinkwatch.yaml"
    conf.write_text(f"output:\n  state_dir: {tmp_path / 'nothing'}\n")
    assert main(["deliveries", "list", "-o", "json", "--config", str(conf)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == []
    assert "no ledger at" in captured.err
    assert not (tmp_path / "nothing").exists()
