"""A shard's packed entities: what is written is read back, and only what is touched is recoded."""

from __future__ import annotations

import zlib

import pytest

from streaming.packed import MAGIC, PackedStore, PackError, pack, unpack


def _store(blob: bytes | None) -> tuple[PackedStore, list[int]]:
    loads: list[int] = []

    def load() -> bytes | None:
        loads.append(1)
        return blob

    return PackedStore(load), loads


def test_entities_come_back_as_they_were_saved_whatever_their_text() -> None:
    store, _ = _store(None)
    texts = {
        "job:ab12": '{"v":1}\ncheckpoint_creep\t{"x":[1,2]}',
        "tm:ab12:host-1 <!channel> ✓": "\t\n\x00 \u2028 " * 300,
        "": "",
    }
    for entity, text in texts.items():
        store.put(entity, text)
    value = store.value()
    assert value is not None and value.startswith(MAGIC)
    again, _ = _store(value)
    assert {e: again.get(e) for e in texts} == texts
    assert again.get("job:other") is None
    assert not again.dirty


def test_an_untouched_entity_is_written_back_as_the_same_bytes() -> None:
    first, _ = _store(None)
    first.put("job:a", "a" * 5000)
    first.put("job:b", "b" * 5000)
    blob = first.value()
    assert blob is not None and len(blob) < 500  # compressed, each on its own
    store, loads = _store(blob)
    store.put("job:b", "c" * 10)
    store.get("job:a")
    assert len(loads) == 1  # read once per turn, however many calls
    after = unpack(store.value() or b"")
    assert after["job:a"] == unpack(blob)["job:a"]
    assert zlib.decompress(after["job:b"]) == b"c" * 10


def test_a_shard_whose_last_entity_is_deleted_has_no_value() -> None:
    store, _ = _store(pack({"job:a": zlib.compress(b"x")}))
    store.delete("job:missing")
    assert not store.dirty
    store.delete("job:a")
    assert store.dirty
    assert store.value() is None


@pytest.mark.parametrize(
    "blob",
    [b"XXXX", MAGIC + b"\x00\x00\x00\x09job", MAGIC + b"\x00\x00\x00\x01\xff\x00\x00\x00\x00"],
    ids=["another-layout", "truncated", "not-utf8"],
)
def test_a_damaged_shard_is_reported_and_its_entities_start_again(blob: bytes) -> None:
    with pytest.raises(PackError):
        unpack(blob)
    store, _ = _store(blob)
    assert store.get("job:a") is None
    assert isinstance(store.damaged, PackError)
    store.put("job:a", "fresh")
    again, _ = _store(store.value())
    assert again.get("job:a") == "fresh"
