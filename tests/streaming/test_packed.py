"""A shard's packed state: what is written is read back, and only what is touched is recoded."""

from __future__ import annotations

import zlib

import pytest

from streaming.packed import MAGIC, EntityDamaged, PackedStore, PackError, pack, unpack


def test_entities_and_meta_come_back_as_they_were_saved_whatever_their_text() -> None:
    store = PackedStore(None)
    texts = {
        "job:ab12": '{"v":1}\ncheckpoint_creep\t{"x":[1,2]}',
        "tm:ab12:host-1 <!channel> ✓": "\t\n\x00 \u2028 " * 300,
        "": "",
    }
    for entity, text in texts.items():
        store.put(entity, text)
    meta = {"timer": 5, "wakes": {"job:ab12": [1, 2]}, "ticks": {"0": 7}}
    store.set_meta(meta)
    value = store.value()
    assert value.startswith(MAGIC)
    again = PackedStore(value)
    assert {e: again.get(e) for e in texts} == texts
    assert again.meta == meta
    assert again.get("job:other") is None
    assert not again.dirty


def test_an_untouched_entity_is_written_back_as_the_same_bytes() -> None:
    first = PackedStore(None)
    first.put("job:a", "a" * 5000)
    first.put("job:b", "b" * 5000)
    blob = first.value()
    assert len(blob) < 500  # compressed, each on its own
    store = PackedStore(blob)
    store.put("job:b", "c" * 10)
    _, after = unpack(store.value())
    assert after["job:a"] == unpack(blob)[1]["job:a"]
    assert zlib.decompress(after["job:b"]) == b"c" * 10


def test_only_a_change_makes_the_shard_dirty() -> None:
    store = PackedStore(pack({"wakes": {"job:a": [1, 2]}}, {"job:a": zlib.compress(b"x")}))
    store.set_meta({"wakes": {"job:a": [1, 2]}})
    store.delete("job:missing")
    assert not store.dirty
    store.set_meta({"wakes": {}})
    assert store.dirty
    store = PackedStore(store.value())
    store.delete("job:a")
    assert store.dirty
    assert unpack(store.value())[1] == {}


@pytest.mark.parametrize(
    "blob",
    [
        b"XXXX",
        MAGIC + b"\x00\x00\x00\x09{}",
        MAGIC + b"\x00\x00\x00\x02{}\x00\x00\x00\x01\xff\x00\x00\x00\x00",
        MAGIC + b"\x00\x00\x00\x02[]",
        b"FWP1" + b"\x00\x00\x00\x01a\x00\x00\x00\x01b",
    ],
    ids=["another-layout", "truncated", "not-utf8", "meta-not-an-object", "first-layout"],
)
def test_a_damaged_shard_is_reported_and_its_entities_start_again(blob: bytes) -> None:
    with pytest.raises(PackError):
        unpack(blob)
    store = PackedStore(blob)
    assert store.get("job:a") is None
    assert isinstance(store.damaged, PackError)
    assert store.dirty  # written back readable, even if nothing else changes
    store.put("job:a", "fresh")
    again = PackedStore(store.value())
    assert again.get("job:a") == "fresh"


def _shard(**entities: str) -> tuple[dict, dict[str, bytes]]:
    meta = {"timer": 5, "wakes": {e: [1, 2] for e in entities}}
    return meta, {e: zlib.compress(t.encode()) for e, t in entities.items()}


def test_one_entity_whose_bytes_do_not_decompress_is_named_and_the_others_read() -> None:
    meta, data = _shard(a="text of a", b="text of b")
    data["a"] = b"\x78\x01garbage"  # a zlib header, then nothing zlib can read
    store = PackedStore(pack(meta, data))
    assert store.damaged is None
    with pytest.raises(EntityDamaged) as raised:
        store.get("a")
    assert raised.value.entity == "a" and isinstance(raised.value, PackError)
    assert store.get("b") == "text of b"


def test_a_cut_shard_keeps_the_entities_read_before_the_cut_and_names_the_lost() -> None:
    meta, data = _shard(a="text of a", b="text of b", c="text of c" * 50)
    blob = pack(meta, data)
    store = PackedStore(blob[: len(blob) - 20])  # c's bytes cut short
    assert isinstance(store.damaged, PackError)
    assert (store.get("a"), store.get("b"), store.get("c")) == ("text of a", "text of b", None)
    assert store.lost == ["c"]
    assert store.meta["wakes"] == {"a": [1, 2], "b": [1, 2]}  # c is no longer due
    assert store.dirty


def test_a_shard_whose_meta_is_damaged_keeps_its_entities_due_at_once() -> None:
    meta, data = _shard(a="text of a")
    blob = bytearray(pack(meta, data))
    blob[len(MAGIC) + 4] = ord("!")  # the meta's JSON, its length intact
    store = PackedStore(bytes(blob))
    assert isinstance(store.damaged, PackError)
    assert store.get("a") == "text of a"
    # The wake-up table is gone: each entity read is due at once, so its turn says anew.
    assert store.meta["wakes"] == {"a": [0, 0]} and store.lost == []


def test_the_entities_are_named_without_reading_their_bytes() -> None:
    # explain lists a shard's entities and decompresses only the ones it asks about.
    blob = pack({}, {"job:a": b"not zlib", "tm:b": zlib.compress(b"{}")})
    store = PackedStore(blob)
    assert store.entities() == ["job:a", "tm:b"]
    assert store.get("tm:b") == "{}"
    with pytest.raises(EntityDamaged):
        store.get("job:a")
