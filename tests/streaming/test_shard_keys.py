"""Shard keys (``streaming/shard_keys.py``): every partition gets its share of the shards.

The hash is checked against Spark's own partitioning, so a Spark release that partitions
otherwise fails here, not as a silent imbalance.
"""

from __future__ import annotations

from collections import Counter

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streaming.bus import detect_input
from streaming.shard_keys import checkpoint_name, partition_of, shard_keys, shard_of
from streaming.ticks import TICK_KEY, tick_value

COUNTS = [(32, 2), (8, 2), (6, 4), (32, 8), (64, 3), (4096, 16), (5, 8)]


@pytest.mark.parametrize(("shards", "partitions"), COUNTS)
def test_each_partition_holds_its_share_of_the_shards_and_each_key_names_its_shard(
    shards: int, partitions: int
) -> None:
    keys = shard_keys(shards, partitions)
    assert [shard_of(k, shards) for k in keys] == list(range(shards))
    assert len(set(keys)) == shards
    held = Counter(partition_of(k, partitions) for k in keys)
    share = shards // partitions
    assert set(held.values()) <= {share, share + 1}, held
    assert sum(held.values()) == shards


def test_the_shards_own_numbers_were_uneven_which_is_why_keys_are_chosen() -> None:
    """The default 32 shards by their own numbers: 12 / 20 over 2 partitions."""
    assert sorted(Counter(partition_of(s, 2) for s in range(32)).values()) == [12, 20]
    assert shard_keys(32, 1) == tuple(range(32))


def test_the_checkpoint_is_named_after_the_shards_and_the_partitions() -> None:
    assert checkpoint_name("detect-kafka", 32, 2, "packed2") == "detect-kafka-shards32-p2-packed2"


@pytest.mark.spark
def test_spark_places_each_key_where_the_keys_were_chosen_for(spark: SparkSession) -> None:
    cases = [(s, p) for s, p in COUNTS if s <= 64]
    for shards, partitions in cases:
        keys = shard_keys(shards, partitions)
        df = spark.createDataFrame([(k,) for k in keys], "shard int")
        placed = dict(
            df.repartition(partitions, "shard")
            .select("shard", F.spark_partition_id().alias("p"))
            .collect()
        )
        assert placed == {k: partition_of(k, partitions) for k in keys}, (shards, partitions)


@pytest.mark.spark
def test_the_detect_input_keys_records_and_ticks_by_the_shards_keys(spark: SparkSession) -> None:
    """Records go to their entity's shard's key, a tick to the keys of the shards it names
    (every shard's when it names none): what the ticker names by shard number arrives."""
    shards, partitions = 8, 2
    keys = shard_keys(shards, partitions)
    entities = [f"job:{i:032x}" for i in range(40)]
    bus = [(e, f'{{"kind":"metric","event_ms":{1_000 + i}}}') for i, e in enumerate(entities)]
    bus += [
        (TICK_KEY, tick_value(5_000, 0, 1, [1, 3, 99])),  # 99: a shard of another count
        (TICK_KEY, tick_value(6_000, 0, 1)),
    ]
    records = spark.createDataFrame(bus, "key string, value string")
    rows = detect_input(records, shards, partitions)
    got = rows.select("shard", "entity", F.pmod(F.xxhash64("entity"), F.lit(shards))).collect()
    for key, entity, index in got:
        if entity != TICK_KEY:
            assert key == keys[index] and shard_of(key, shards) == index
    ticks = sorted(key for key, entity, _ in got if entity == TICK_KEY)
    assert ticks == sorted([keys[1], keys[3], *keys])
    placed = Counter(partition_of(k, partitions) for k in {k for k, _e, _i in got})
    assert sorted(placed.values()) == [4, 4]
