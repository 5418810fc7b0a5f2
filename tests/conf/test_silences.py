"""Silences and maintenance windows: matchers, fixed ranges, weekly windows, bad config."""

from __future__ import annotations

import datetime as dt
import re
import time

import pytest
from pydantic import ValidationError

from conf import AppConfig
from conf.silences import Silence, silence_for
from detectors import Alert, AlertStatus, Severity
from detectors.model import NAME_CHARS


def at(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def alert(when: str, **kw) -> Alert:
    base = {
        "alert_id": "a",
        "detector": "idle_heap_growth",
        "entity": "tm:c3",
        "status": AlertStatus.FIRING,
        "severity": Severity.WARNING,
        "event_time_ms": at(when),
        "summary": "s",
        "job_name": "orders-enrich",
        "tm_id": "container_e05_1699999999999_0042_01_000003",
        "host": "worker-7",
    }
    return Alert(**{**base, **kw})


WINDOW = {"starts_at": "2026-11-22T02:00:00Z", "ends_at": "2026-11-22T04:00:00Z"}


def silences(*items: dict) -> tuple[Silence, ...]:
    return AppConfig.model_validate({"silences": list(items)}).silences


def test_fixed_range_with_regex_matchers_on_the_whole_value() -> None:
    s = silences(
        {
            "name": "orders-upgrade",
            "matchers": {"job_name": "orders-.*", "detector": "idle_heap_growth"},
            "starts_at": "2026-11-22T02:00:00Z",
            "ends_at": "2026-11-22T04:00:00Z",
        }
    )
    assert silence_for(s, alert("2026-11-22T03:00:00+00:00"), "prod") == "orders-upgrade"
    assert silence_for(s, alert("2026-11-22T04:00:00+00:00"), "prod") is None  # end excluded
    assert silence_for(s, alert("2026-11-22T01:59:59+00:00"), "prod") is None
    other_job = alert("2026-11-22T03:00:00+00:00", job_name="payments-orders-x")
    assert silence_for(s, other_job, "prod") is None  # fullmatch, not search


def test_weekly_window_crossing_midnight_in_a_local_time_zone() -> None:
    s = silences(
        {
            "name": "sat-night",
            "matchers": {"cluster": "prod-.*"},
            "weekly": {
                "days": ["sat"],
                "start": "23:00",
                "end": "02:00",
                "timezone": "Europe/Berlin",
            },
        }
    )
    # 2026-11-21 is a Saturday; Berlin is UTC+1 in November.
    assert silence_for(s, alert("2026-11-21T22:30:00+00:00"), "prod-eu") == "sat-night"
    assert silence_for(s, alert("2026-11-22T00:59:00+00:00"), "prod-eu") == "sat-night"
    assert silence_for(s, alert("2026-11-22T01:00:00+00:00"), "prod-eu") is None
    assert silence_for(s, alert("2026-11-20T22:30:00+00:00"), "prod-eu") is None  # Friday
    assert silence_for(s, alert("2026-11-21T22:30:00+00:00"), "staging") is None


@pytest.mark.parametrize(
    ("item", "error"),
    [
        (
            {"name": "x", "matchers": {}, "starts_at": "2026-11-22T02:00:00Z"},
            "at least one matcher",
        ),
        (
            {"name": "x", "matchers": {"job_name": "("}, "starts_at": "2026-11-22T02:00:00Z"},
            "job_name: not a valid regular expression",
        ),
        ({"name": "x", "matchers": {"detector": "a"}}, "exactly one"),
        (
            {"name": "x", "matchers": {"detector": "a"}, "starts_at": "2026-11-22T02:00:00"},
            "need a time zone",
        ),
        (
            {
                "name": "x",
                "matchers": {"detector": "a"},
                "weekly": {"start": "25:00", "end": "02:00"},
            },
            "is not HH:MM",
        ),
        (
            {
                "name": "x",
                "matchers": {"detector": "a"},
                "weekly": {"start": "01:00", "end": "02:00", "timezone": "Mars/Olympus"},
            },
            "unknown time zone",
        ),
        (
            {
                "name": "x",
                "matchers": {"detector": "a"},
                "starts_at": "2026-11-22T02:00:00Z",
                "ends_at": "2026-11-22T01:00:00Z",
            },
            "ends_at must be after starts_at",
        ),
    ],
)
def test_bad_silences_name_the_problem(item: dict, error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        silences(item)


def test_silence_names_are_unique() -> None:
    one = {"name": "x", "matchers": {"detector": "a"}, "starts_at": "2026-11-22T02:00:00Z"}
    with pytest.raises(ValidationError, match="unique"):
        silences(one, one)


@pytest.mark.parametrize(
    ("texts", "alert_fields", "covered"),
    [
        (["job_name=pay-etl"], {"job_name": "pay-etl"}, True),
        (["job_name=pay-etl"], {"job_name": "pay-etl-2"}, False),  # exact, whole value
        (["job_name=pay.etl"], {"job_name": "payXetl"}, False),  # a dot is a dot
        (['job_name=~"pay-.*"', "detector=checkpoint_failures"], {"job_name": "pay-2"}, True),
        (['job_name="pay etl"'], {"job_name": "pay etl"}, True),  # quotes as amtool takes them
    ],
)
def test_amtool_matchers_match_exactly_or_by_regex(
    texts: list[str], alert_fields: dict, covered: bool
) -> None:
    from conf.silences import parse_matchers

    alert = Alert(
        alert_id="a",
        detector="checkpoint_failures",
        entity="job:" + "b" * 32,
        severity=Severity.WARNING,
        status=AlertStatus.FIRING,
        event_time_ms=0,
        summary="s",
        **alert_fields,
    )
    assert parse_matchers(texts).matches(alert, "default") is covered


@pytest.mark.parametrize(
    ("texts", "error"),
    [
        (["job"], "not a matcher"),
        (["team=payments"], "no label 'team'"),
        (["job_name!=x"], "negative matchers"),
        (["job_name=a", "job_name=b"], "matched twice"),
        (["job_name=~("], "not a valid regular expression"),
    ],
)
def test_bad_matchers_name_the_problem(texts: list[str], error: str) -> None:
    from conf.silences import parse_matchers

    with pytest.raises(ValueError, match=re.escape(error)):
        parse_matchers(texts)


def test_durations_read_as_amtool_writes_them() -> None:
    from conf.silences import parse_duration

    assert parse_duration("1h30m") == dt.timedelta(minutes=90)
    assert parse_duration("2d") == dt.timedelta(days=2)
    assert parse_duration("90s") == dt.timedelta(seconds=90)
    for bad in ("", "0m", "1 hour", "h"):
        with pytest.raises(ValueError, match="duration|some time"):
            parse_duration(bad)


def test_config_regexes_see_names_cut_to_the_edges_cap_whatever_reaches_them() -> None:
    # A name that reached an alert uncut (from anywhere: the bus, a test, an old state):
    # silences, routes and overrides match the name as the parsers cut it, so a regex runs
    # on NAME_CHARS characters at most. `.{1,NAME_CHARS}` holds exactly for a cut name.
    huge = "orders-etl-" + "x" * (1 << 20) + "-prod"
    fits = f".{{1,{NAME_CHARS}}}"
    s = silences(
        {
            "name": "cut",
            "matchers": {"job_name": fits, "host": fits, "tm_id": fits},
            "starts_at": "2026-11-22T02:00:00Z",
            "ends_at": "2026-11-22T04:00:00Z",
        }
    )
    a = alert("2026-11-22T03:00:00+00:00", job_name=huge, host=huge, tm_id=huge)
    assert silence_for(s, a, "prod") == "cut"
    cfg = AppConfig.model_validate(
        {
            "overrides": [
                {"match": {"job_name": fits}, "detectors": {"jvm_fatal": {"enabled": False}}}
            ]
        }
    )
    assert cfg.resolver().params("jvm_fatal", None, huge).enabled is False
    # The pattern on a 1 MiB name made to cost it most (every position a candidate):
    # measured and shown with -s, not asserted (the clock is not the test).
    worst = "-etl-" * ((1 << 20) // 5)
    s = silences({"name": "p", "matchers": {"job_name": ".*-etl-.*-prod"}, **WINDOW})
    a = alert("2026-11-22T03:00:00+00:00", job_name=worst)
    start = time.perf_counter()
    assert silence_for(s, a, "prod") is None
    print(f"`.*-etl-.*-prod` on a 1 MiB name: {(time.perf_counter() - start) * 1000:.2f} ms")


# Flink's Prometheus reporter spells the TaskManager its logs call `localhost:40003-6cf67b`
# as `localhost:40003_6cf67b`; an alert carries whichever its entity had seen best.
LOGGED, SCRAPED = "localhost:40003-6cf67b", "localhost:40003_6cf67b"


@pytest.mark.parametrize("alert_says", [LOGGED, SCRAPED])
@pytest.mark.parametrize("typed", [LOGGED, SCRAPED, "localhost.40003.6cf67b"])
def test_a_plain_tm_id_silences_its_taskmanager_in_either_spelling(
    typed: str, alert_says: str
) -> None:
    from conf.silences import parse_matchers

    a = alert("2026-11-22T03:00:00+00:00", tm_id=alert_says)
    # From the config file (the id as a regex: `.` is taken as itself) ...
    s = silences({"name": "tm", "matchers": {"tm_id": typed}, **WINDOW})
    assert silence_for(s, a, "prod") == "tm"
    # ... and from the command line, where `tm_id=<id>` is stored escaped.
    assert parse_matchers([f"tm_id={typed}"]).matches(a, "prod")
    # Another TaskManager, in any spelling, is not covered.
    other = alert("2026-11-22T03:00:00+00:00", tm_id=alert_says.replace("40003", "40004"))
    assert silence_for(s, other, "prod") is None
    assert not parse_matchers([f"tm_id={typed}"]).matches(other, "prod")


@pytest.mark.parametrize(
    ("pattern", "alert_says", "covered"),
    [
        # A regular expression proper means what it says, on the spelling the alert carries.
        ("localhost:40003-.*", LOGGED, True),
        ("localhost:40003-.*", SCRAPED, False),
        (".*_6cf67b", LOGGED, False),
        ("localhost:4000[0-9].6cf67b", SCRAPED, True),
        (r"localhost:\d+-6cf67b", SCRAPED, False),
        # The spelling-blind match is for ids, not for other labels: hosts and job names
        # are matched as written.
        ("host=worker_7", "worker-7", False),
        ("job_name=orders_enrich", "orders-enrich", False),
    ],
)
def test_a_regex_matches_the_spelling_the_alert_carries_and_only_tm_id_folds(
    pattern: str, alert_says: str, covered: bool
) -> None:
    from conf.silences import parse_matchers

    if "=" in pattern:
        name, value = pattern.split("=")
        a = alert("2026-11-22T03:00:00+00:00", **{name: alert_says})
        assert parse_matchers([pattern]).matches(a, "prod") is covered
        return
    a = alert("2026-11-22T03:00:00+00:00", tm_id=alert_says)
    s = silences({"name": "tm", "matchers": {"tm_id": pattern}, **WINDOW})
    assert (silence_for(s, a, "prod") == "tm") is covered


def test_plain_ids_are_told_from_regexes() -> None:
    from conf.silences import plain_id

    ids = [LOGGED, SCRAPED, "615c9d0b-07b3-4ec5-b801-27ab5a4c6d94", "10.0.0.5:40003-6cf67b"]
    ids += ["flink-taskmanager-1-2", "tm 1/a@b#c~d", "täskmänager-1"]
    for tm in ids:
        assert plain_id(tm) == tm
        assert plain_id(re.escape(tm)) == tm  # what `name=value` stores
    regexes = ["tm-.*", "tm-[0-9]", "tm-(a|b)", "tm-1+", "tm-1?", "^tm$", r"tm\d", r"\1", "a{2}"]
    for regex in regexes:
        assert plain_id(regex) is None, regex
    assert plain_id("") is None
