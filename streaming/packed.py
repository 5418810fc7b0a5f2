"""A shard's state as one value: its wake-up table and entity → compressed saved text.

Why one value per shard and not a map entry per entity (nor a second value for the
wake-up table): each state call of the Python state API is a synchronous round trip to
the JVM. On an idle machine that is 40-100 µs; on two busy cores (parse tasks, the
broker, the shipper) each one waits for a time slice, and a 2,000-job fleet's 10,000
entities took 24 s of a 62 s batch in map-state calls (py-spy, `make bench` at 10,000
records/s); at 500 records/s, with every shard's turn a few calls, the calls were most
of the Python workers' time. One read and one write per shard and turn cost the same
whatever the entity count.

The price is that a turn rewrites its whole shard, not only the entities it touched;
each entity's text is compressed on its own (zlib level 1: a job's ~5.6 KB to ~1.2 KB)
so an untouched entity is copied as bytes, never decoded or compressed again.

Layout: ``MAGIC``; a 4-byte big-endian length and the shard's meta as JSON (the runner's
wake-up table, the ticks seen, the timer); then, per entity, a 4-byte length and the
UTF-8 entity, a 4-byte length and the compressed text.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

MAGIC = b"FWP2"
_LEN = struct.Struct(">I")
_LEVEL = 1


class PackError(ValueError):
    """A shard value that is not this layout (another release's, or damaged)."""


def unpack(blob: bytes) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The shard's meta and entity → compressed text, as :func:`pack` wrote them."""
    if blob[: len(MAGIC)] != MAGIC:
        msg = f"not a packed shard (starts {bytes(blob[:4])!r})"
        raise PackError(msg)
    view = memoryview(blob)
    out: dict[str, bytes] = {}
    at, end = len(MAGIC), len(blob)
    try:
        (n,) = _LEN.unpack_from(view, at)
        meta = json.loads(bytes(view[at + 4 : at + 4 + n]))
        at += 4 + n
        while at < end:
            (n,) = _LEN.unpack_from(view, at)
            entity = str(view[at + 4 : at + 4 + n], "utf-8")
            at += 4 + n
            (n,) = _LEN.unpack_from(view, at)
            out[entity] = bytes(view[at + 4 : at + 4 + n])
            at += 4 + n
    except (struct.error, ValueError) as exc:  # JSON and UTF-8 errors are ValueErrors
        msg = f"damaged packed shard at byte {at}: {exc}"
        raise PackError(msg) from exc
    if at != end or not isinstance(meta, dict):
        msg = f"damaged packed shard: {at - end} bytes short"
        raise PackError(msg)
    return meta, out


def pack(meta: dict[str, Any], entities: dict[str, bytes]) -> bytes:
    """The value of a shard with ``meta`` holding ``entities`` (entity → compressed text)."""
    head = json.dumps(meta, separators=(",", ":")).encode("utf-8")
    parts = [MAGIC, _LEN.pack(len(head)), head]
    for entity, data in entities.items():
        key = entity.encode("utf-8")
        parts += (_LEN.pack(len(key)), key, _LEN.pack(len(data)), data)
    return b"".join(parts)


class PackedStore:
    """A :class:`~streaming.runner.ShardStore` over one packed shard value.

    Only the entities asked for are decompressed; the others are written back as the
    bytes they were. A value that cannot be read leaves an empty shard and
    :attr:`damaged` set: its entities start again from their next events.

    Args:
        blob: The shard's value (``None``: the shard has none yet).
    """

    def __init__(self, blob: bytes | None) -> None:
        self.damaged: PackError | None = None
        try:
            self.meta, self._entities = unpack(blob) if blob else ({}, {})
        except PackError as exc:
            self.meta, self._entities, self.damaged = {}, {}, exc
        self.dirty = self.damaged is not None

    def get(self, entity: str) -> str | None:
        """The entity's saved text, if any."""
        data = self._entities.get(entity)
        return None if data is None else zlib.decompress(data).decode("utf-8")

    def put(self, entity: str, text: str) -> None:
        """Save the entity's text."""
        self._entities[entity] = zlib.compress(text.encode("utf-8"), _LEVEL)
        self.dirty = True

    def delete(self, entity: str) -> None:
        """Forget the entity."""
        if self._entities.pop(entity, None) is not None:
            self.dirty = True

    def set_meta(self, meta: dict[str, Any]) -> None:
        """Replace the shard's meta (marks the shard dirty if it differs)."""
        if meta != self.meta:
            self.meta = meta
            self.dirty = True

    def value(self) -> bytes:
        """The shard's value to write back."""
        return pack(self.meta, self._entities)
