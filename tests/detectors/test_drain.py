"""The small Drain: masking, merging, leaves, the cap and its drops, determinism."""

from __future__ import annotations

import random
import string

from detectors.drain import (
    MASK,
    MAX_TOKEN_CHARS,
    MAX_TOKENS,
    Templates,
    leaf_key,
    similarity,
    tokens,
)

SIM = 0.6


def mine(v: Templates, line: str, at: int = 0, group: str = "E|", cap: int = 50, **kw: object):
    kw.setdefault("known_cap", cap)
    return v.mine(group, tokens(line), at, similarity=SIM, new_cap=cap, **kw)  # type: ignore[arg-type]


# --- masking ---------------------------------------------------------------------------------


def test_variable_tokens_are_masked_and_words_kept() -> None:
    line = (
        "Lost 3 records of partition orders-7 at offset 81723 from 10.0.3.17:9092 "
        "(attempt 7f3a9c0e-1b2d-4e5f-8a9b-0c1d2e3f4a5b) after PT10S in /data/flink/chk-12 "
        "for job 3631d292e50708eb38e1304df762587a, source (2/4)#0 hdfs://nn:8020/x took 15 ms"
    )
    toks = tokens(line)
    assert toks == [
        "Lost", MASK, "records", "of", "partition", MASK, "at", "offset", MASK, "from", MASK,
        "(attempt", MASK, "after", MASK, "in", MASK, "for", "job", MASK, "source", MASK, MASK,
        "took", MASK, "ms",
    ]  # fmt: skip


def test_only_the_first_line_counts_and_long_lines_and_tokens_are_cut() -> None:
    assert tokens("Task failed\n\tat org.apache.Foo.bar(Foo.java:12)\nCaused by: x") == [
        "Task",
        "failed",
    ]
    long = " ".join(f"w{c}" for c in string.ascii_letters * 3)
    assert len(tokens(long.replace("w", "word"))) == MAX_TOKENS
    big = tokens("x" * 500 + " end")
    assert len(big[0]) == MAX_TOKEN_CHARS and big[0].endswith("…") and big[1] == "end"
    assert tokens("") == [] and tokens("   \n  ") == []


# --- templates -------------------------------------------------------------------------------


def test_lines_that_differ_in_variables_share_one_template() -> None:
    v = Templates()
    a, new_a = mine(v, "Failed to commit offsets for checkpoint 12 of partition p-3", 1)
    b, new_b = mine(v, "Failed to commit offsets for checkpoint 4711 of partition p-9", 2)
    assert (new_a, new_b) == (True, False) and a is b
    assert b.count == 2 and (b.first_ms, b.last_ms) == (1, 2)
    assert v.size == 1


def test_similar_lines_merge_and_the_differing_word_becomes_a_mask() -> None:
    v = Templates()
    a, _ = mine(v, "Connection to broker alpha was closed by peer unexpectedly")
    b, new = mine(v, "Connection to broker beta was closed by peer unexpectedly")
    assert not new and a is b
    assert b.text == f"Connection to broker {MASK} was closed by peer unexpectedly"
    # The merged template takes a third name without changing again.
    c, new = mine(v, "Connection to broker gamma was closed by peer unexpectedly")
    assert not new and c is a and c.text == b.text


def test_lines_below_the_threshold_start_their_own_template() -> None:
    v = Templates()
    a, _ = mine(v, "Connection to broker alpha was closed by peer")
    b, new = mine(v, "Connection to registry down: retrying soon, giving up later")
    assert new and a is not b and v.size == 2
    c, new = mine(v, "Connection to registry refused: the handshake timed out again")
    assert new and c is not b and v.size == 3
    assert similarity(b.text.split(" "), c.text.split(" ")) < SIM


def test_different_token_counts_prefixes_and_groups_never_share_a_template() -> None:
    v = Templates()
    base, _ = mine(v, "Could not send heartbeat to coordinator")
    longer, new1 = mine(v, "Could not send heartbeat to coordinator node")
    other_prefix, new2 = mine(v, "Would not send heartbeat to coordinator")
    other_group, new3 = mine(v, "Could not send heartbeat to coordinator", group="E|java.io.X")
    warn, new4 = mine(v, "Could not send heartbeat to coordinator", group="W|")
    assert new1 and new2 and new3 and new4
    assert len({id(t) for t in (base, longer, other_prefix, other_group, warn)}) == 5
    assert leaf_key("E|", tokens("a b c")) == "E||3|a b"


def test_the_best_template_of_a_leaf_wins_and_ties_go_to_the_more_general() -> None:
    v = Templates()
    mine(v, "Fetch of topic t failed: timeout on leader alpha")
    mine(v, "Fetch of topic t denied: quota of client beta")
    # Closer to the first (one token differs) than to the second (three differ).
    t, new = mine(v, "Fetch of topic t failed: timeout on leader gamma")
    assert not new and t.text == f"Fetch of topic t failed: timeout on leader {MASK}"


# --- the cap ---------------------------------------------------------------------------------


def test_a_new_template_makes_room_among_the_new_ones_of_its_pool_only() -> None:
    v = Templates()
    learned, _ = mine(v, "learned alpha line", 0, cap=2, learn=True)
    old, _ = mine(v, "unknown beta line", 1, group="E|x", pool="E|", cap=2)
    warn, _ = mine(v, "unknown warn line", 2, group="W|", pool="W|", cap=2)
    recent, _ = mine(v, "unknown gamma line", 3, group="E|", pool="E|", cap=2)
    mine(v, "learned alpha line", 4, cap=2)  # seen again: the most recent
    newest, new = mine(v, "unknown delta line", 5, group="E|", pool="E|", cap=2)
    assert new and v.size == 4 and (v.dropped, v.forgotten) == (1, 0)
    assert v.get(old.id) is None  # the least recently seen new one of its pool
    assert {t.id for t in v.all()} == {learned.id, warn.id, recent.id, newest.id}


def test_learned_templates_go_only_for_learned_ones_least_recently_seen_first() -> None:
    v = Templates()
    a, _ = mine(v, "first learned line", 0, cap=2, learn=True)
    b, _ = mine(v, "second learned line", 1, cap=2, learn=True)
    for i in range(10):
        mine(v, f"noise {'abcdefghij'[i]} line", 2 + i, cap=1)  # new ones: no learned one goes
    assert v.get(a.id) is a and v.get(b.id) is b and v.forgotten == 0
    mine(v, "first learned line", 20, cap=2)  # a is the most recently seen now
    c, _ = mine(v, "third line", 21, cap=2)
    v.learn(c, cap=2)  # paged once: known from now on, b is forgotten
    assert {t.id for t in v.all() if t.known} == {a.id, c.id} and v.forgotten == 1


def test_kept_templates_are_never_dropped() -> None:
    v = Templates()
    a, _ = mine(v, "first kept line", 0, cap=2)
    b, _ = mine(v, "second kept line", 1, cap=2)
    c, _ = mine(v, "third line", 2, cap=2, keep=[a.id, b.id])
    assert {t.id for t in v.all()} == {a.id, b.id, c.id}  # over the cap by what is kept
    mine(v, "fourth line", 3, cap=2, keep=[a.id, b.id])
    assert v.get(c.id) is None and v.get(a.id) and v.get(b.id)


def test_a_flood_of_unique_lines_stays_within_the_cap_and_keeps_what_was_learned() -> None:
    rng = random.Random(24)
    v = Templates()
    learned, _ = mine(v, "Offset commit failed on partition orders-3", 0, cap=20, learn=True)
    pool = ["".join(rng.choices(string.ascii_letters, k=rng.randint(1, 12))) for _ in range(5000)]
    for i in range(100_000):
        mine(v, " ".join(rng.choices(pool, k=rng.randint(1, 30))), i + 1, cap=20)
    assert v.size == 1 + 20 and len(v.all()) == v.size  # the learned one beside 20 new ones
    assert v.get(learned.id) is learned
    assert v.dropped >= 99_000
    # Bounded text: at most MAX_TOKENS tokens of MAX_TOKEN_CHARS each per template.
    assert max(len(t.text) for t in v.all()) <= MAX_TOKENS * (MAX_TOKEN_CHARS + 1)


def test_mining_is_deterministic_and_survives_json() -> None:
    lines = [f"Request {i} to shard s{i % 3} failed with status {500 + i % 4}" for i in range(50)]
    lines += [f"Queue {name} is full" for name in ("a", "b", "c")]

    def run() -> Templates:
        v = Templates()
        for i, line in enumerate(lines):
            mine(v, line, i)
        return v

    a, b = run(), run()
    assert a.model_dump() == b.model_dump()
    again = Templates.model_validate_json(a.model_dump_json())
    assert again.model_dump() == a.model_dump()
    before = again.all()[0].count
    t, new = mine(again, lines[0], 99)
    assert (
        not new
        and t.count == before + 1
        and t.text == "Request <*> to shard <*> failed with status <*>"
    )
