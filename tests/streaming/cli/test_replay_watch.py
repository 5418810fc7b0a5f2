"""``flinkwatch replay --watch``: a try at each valid save, over the parse kept when it can be."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import streaming.replay
from conf import AppConfig, load_config
from streaming.cli import main
from streaming.cli import replay_watch as rw
from streaming.cli.replay_run import Staged

REAL = Path(__file__).resolve().parents[2] / "data" / "real" / "growth_2_3"
GROWTH = "detectors:\n  checkpoint_state_growth: {min_samples: 10}\n"
SAVES = [
    # Try 2: a threshold off, the same parse.
    "detectors:\n  checkpoint_state_growth: {enabled: false}\n",
    # Try 3: every record too large: a parsing section of its own.
    "parsing: {max_record_bytes: 1}\n",
    # No try: refused, naming the field.
    "detectors:\n  checkpoint_state_growth: {min_samples: -5}\n",
]
DONE = re.compile(r"replay: try \d+ (done|failed) in")


class Operator:
    """The person at the editor: after each try, reads the alerts and saves the next file.

    Stands in for the watch's pause between two reads; once a save has made no try for
    a few reads (the refused one), presses Ctrl-C.
    """

    def __init__(self, config: Path, out: Path, caplog: pytest.LogCaptureFixture) -> None:
        self.config, self.out, self.caplog = config, out, caplog
        self.alerts: list[list[dict[str, Any]]] = []
        self.waits = 0

    def __call__(self, seconds: float) -> None:
        assert seconds == rw.POLL_S
        tries = sum(1 for r in self.caplog.records if DONE.search(r.getMessage()))
        if tries > len(self.alerts):
            self.alerts.append([json.loads(x) for x in self.out.read_text().splitlines()])
            self.waits = 0
            if tries <= len(SAVES):
                self.config.write_text(SAVES[tries - 1])
        self.waits += 1
        if self.waits > 6:
            raise KeyboardInterrupt


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each parse of the files a replay makes, by its ``parsing.max_record_bytes``."""
    made: list[int] = []
    parse = streaming.replay.parsed_events

    def counted(logs, metrics, cfg):  # type: ignore[no-untyped-def]
        made.append(cfg.parsing.max_record_bytes)
        return parse(logs, metrics, cfg)

    monkeypatch.setattr(streaming.replay, "parsed_events", counted)
    return made


@pytest.mark.spark
def test_each_valid_save_replays_again_over_the_parse_kept_when_its_section_is_the_same(
    spark, tmp_path, caplog, capsys, monkeypatch, parses
) -> None:
    caplog.set_level(logging.INFO)
    config, out = tmp_path / "thresholds.yaml", tmp_path / "alerts.jsonl"
    config.write_text(GROWTH)
    operator = Operator(config, out, caplog)
    monkeypatch.setattr(rw, "_wait", operator)
    work = tmp_path / "tmp"
    work.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(work))
    args = ["replay", "--config", str(config), "--output", str(out), "--watch"]
    args += ["--logs", str(REAL / "growth_2_3.log"), "--metrics", str(REAL / "growth_2_3.jsonl")]

    assert main(args) == 0

    # The first try pages the growth; the second, with it off, nothing; the third refuses
    # every record; the refused save makes no fourth.
    assert [[a["detector"] for a in alerts] for alerts in operator.alerts] == [
        ["checkpoint_state_growth"],
        [],
        [],
    ]
    default = load_config(None).parsing.max_record_bytes
    assert parses == [default, 1]  # the second try scanned the first one's events
    assert "replay: try 2, over the events parsed before" in caplog.text
    assert "replay: try 3, over the files parsed anew" in caplog.text
    assert "replay: try 4" not in caplog.text
    assert "detectors.checkpoint_state_growth.min_samples" in caplog.text
    assert "keeping the running config" in caplog.text
    assert "replay: stopped watching" in caplog.text
    summaries = capsys.readouterr().out
    assert summaries.count("dead letters:") == 3 and "too_large=" in summaries
    assert list(work.iterdir()) == []  # every try's files gone with the watch


def test_watch_needs_the_config_it_watches(tmp_path, caplog) -> None:
    args = ["replay", "--metrics", str(tmp_path), "--output", str(tmp_path / "a.jsonl")]
    assert main([*args, "--watch"]) == 2
    assert "--watch replays again when --config's file changes: it needs --config" in caplog.text


def test_a_try_waits_for_a_valid_change_of_either_file(monkeypatch) -> None:
    new = load_config(None)
    base = new.model_copy(
        update={"parsing": new.parsing.model_copy(update={"max_record_bytes": 1})}
    )
    answers = {"new": [None, None, None], "base": [None, None, base]}
    watchers = [
        SimpleNamespace(current=new, poll=lambda: answers["new"].pop(0)),
        SimpleNamespace(current=base, poll=lambda: answers["base"].pop(0)),
    ]
    waits: list[float] = []
    monkeypatch.setattr(rw, "_wait", waits.append)

    got = rw._next_config(watchers)  # type: ignore[arg-type]

    assert got[0] is new and got[1] is base
    assert waits == [rw.POLL_S] * 3  # both files read at each wait, until one had changed
    assert answers == {"new": [], "base": []}


class FakeParse:
    """A kept parse as the watch handles it: its parsing section, and whether it was freed."""

    def __init__(self, parsing: Any) -> None:
        self.parsing, self.released = parsing, False

    def release(self) -> None:
        self.released = True


def test_a_failed_try_is_said_and_the_next_save_tries_again_without_the_old_parse(
    tmp_path, monkeypatch, caplog
) -> None:
    caplog.set_level(logging.INFO)
    first = load_config(None)
    other = first.model_copy(
        update={"parsing": first.parsing.model_copy(update={"max_record_bytes": 1})}
    )
    letters = tmp_path / "dead"
    letters.mkdir()
    tries: list[AppConfig] = []
    old_parse = FakeParse(first.parsing)

    def run_replay(args, cfg, base_cfg, spark, short, staged, kept):  # type: ignore[no-untyped-def]
        tries.append(cfg)
        assert staged.work.is_dir()
        if len(tries) == 1:
            kept.append(old_parse)
            (letters / "batch-00000000.jsonl").write_text("{}\n")
            raise RuntimeError("the report's directory is not writable")
        assert old_parse.released and kept == []  # freed before this try parses anew
        assert not list(letters.iterdir())  # the first try's dead letters are gone
        return 0

    watcher = SimpleNamespace(path=Path("t.yaml"), current=other, poll=lambda: other)
    waits = iter([None])

    def wait(seconds: float) -> None:
        if next(waits, "stop") == "stop":
            raise KeyboardInterrupt

    monkeypatch.setattr(rw, "run_replay", run_replay)
    monkeypatch.setattr(rw, "_wait", wait)
    args = SimpleNamespace(baseline=None, deadletters=str(letters), keep_work=False)
    staged = Staged(tmp_path / "work", tmp_path, tmp_path, tmp_path, tmp_path / "alerts.jsonl")

    rc = rw.watch_replay(args, first, None, None, True, staged, [watcher])  # type: ignore[arg-type]

    assert rc == 0
    assert tries == [first, other]
    assert "replay: try 1 failed: the report's directory is not writable" in caplog.text
    assert "replay: try 2, over the files parsed anew" in caplog.text
    assert "replay: try 2 done" in caplog.text
    assert not list((tmp_path / "work").iterdir())  # each try's own directory gone


def test_sigterm_stops_the_watch_as_ctrl_c_does() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), rw._terminate_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10**6):  # bytecode for the handler to run between
            pass
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.spark
def test_a_save_of_the_baseline_compares_again_over_the_one_parse_both_configs_share(
    spark, tmp_path, caplog, capsys, monkeypatch, parses
) -> None:
    caplog.set_level(logging.INFO)
    config, baseline = tmp_path / "new.yaml", tmp_path / "old.yaml"
    config.write_text(GROWTH)
    baseline.write_text(GROWTH)
    out = tmp_path / "alerts.jsonl"

    def operator(seconds: float) -> None:
        # After the first try: the baseline without the growth; after the second: Ctrl-C.
        if "replay: try 2 done" in caplog.text:
            raise KeyboardInterrupt
        baseline.write_text(SAVES[0])

    monkeypatch.setattr(rw, "_wait", operator)
    args = ["replay", "--config", str(config), "--baseline", str(baseline), "--watch"]
    args += ["--output", str(out), "-o", "json"]
    args += ["--logs", str(REAL / "growth_2_3.log"), "--metrics", str(REAL / "growth_2_3.jsonl")]

    assert main(args) == 0

    first, second = _objects(capsys.readouterr().out)
    # The same config twice, then the baseline without the growth: the new run gains it.
    assert first["totals"]["unchanged"] == 1 and first["totals"]["gained"] == 0
    assert second["totals"]["gained"] == 1 and second["pages"] == {"baseline": 0, "new": 1}
    assert len(parses) == 1  # one parse, kept for both configs and both tries
    assert "replay: try 2, over the events parsed before" in caplog.text


def _objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects printed one after another."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while text[at:].strip():
        at += len(text[at:]) - len(text[at:].lstrip())
        obj, at = decoder.raw_decode(text, at)
        out.append(obj)
    return out
