"""The key each shard's state is kept under: shards spread evenly over the partitions.

The detect query groups its rows by shard and Spark places each group in the partition
``pmod(murmur3(key, seed 42), partitions)`` (its hash partitioning), one RocksDB store and
one task per partition and micro-batch. Keyed by the shard's own number, 0 to 31, the
32 shards of the default then fell 12 / 20 over the default 2 partitions and 1 to 6 over
8: one Python worker did 62 % of the detectors' work while the other waited, and on a
cluster the slowest task set every micro-batch's pace. Balanced, at 10,028 records/s the
detect stage of a page took p50 15.8 s against 29.3 (issue #34's benchmark).

So shard ``s`` is kept under the first number of ``s, s + shards, s + 2 * shards, ...``
that Spark places in partition ``s mod partitions``: each partition holds ``shards /
partitions`` of them, and the shard is still ``key mod shards``. The keys depend on the
partition count, so the detect checkpoint is named after it (:func:`checkpoint_name`).
"""

from __future__ import annotations

from functools import cache

#: Spark's seed for hash partitioning (``HashPartitioning``'s ``Murmur3Hash``).
_SEED = 42
_MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def murmur3_int(value: int, seed: int = _SEED) -> int:
    """Spark's ``Murmur3_x86_32.hashInt``: the signed 32-bit hash of one int."""
    k = (value & _MASK) * 0xCC9E2D51 & _MASK
    k = _rotl(k, 15) * 0x1B873593 & _MASK
    h = (seed & _MASK) ^ k
    h = (_rotl(h, 13) * 5 + 0xE6546B64) & _MASK
    h ^= 4  # the length in bytes
    h ^= h >> 16
    h = h * 0x85EBCA6B & _MASK
    h ^= h >> 13
    h = h * 0xC2B2AE35 & _MASK
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_of(key: int, partitions: int) -> int:
    """The partition Spark's hash partitioning gives a row keyed by the int ``key``."""
    return murmur3_int(key) % partitions  # Python's % is Spark's pmod for a positive divisor


@cache
def shard_keys(shards: int, partitions: int) -> tuple[int, ...]:
    """Each shard's key: ``keys[s] mod shards == s``, in partition ``s mod partitions``.

    Each number lands in the partition wanted with a chance of ``1 / partitions``: the
    search tries ``64 * partitions`` of them, and a shard that all of them miss (a chance
    of about e^-64) keeps its own number.
    """
    keys: list[int] = []
    for s in range(shards):
        want = s % partitions
        tries = range(s, s + 64 * partitions * shards, shards)
        keys.append(next((k for k in tries if partition_of(k, partitions) == want), s))
    return tuple(keys)


def shard_of(key: int, shards: int) -> int:
    """The shard a key stands for (:func:`shard_keys`' inverse)."""
    return key % shards


def checkpoint_name(query: str, shards: int, partitions: int, layout: str) -> str:
    """The detect checkpoint's name: its shards, the partitions they spread over, its layout.

    Another count of either keys the state otherwise, so it is another checkpoint,
    rebuilt from the bus (:func:`streaming.checkpoints.set_aside_stale`).
    """
    return f"{query}-shards{shards}-p{partitions}-{layout}"
