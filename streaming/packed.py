"""A shard's entities as one value: entity → compressed saved text, read and written whole.

Why one value per shard and not a map entry per entity: each state call of the Python
state API is a synchronous round trip to the JVM. On an idle machine that is 40-100 µs;
on two busy cores (parse tasks, the broker, the shipper) each one waits for a time slice,
and a 2,000-job fleet's 10,000 entities took 24 s of a 62 s batch in map-state calls
(py-spy, `make bench` at 10,000 records/s). One read and one write per shard per batch
cost the same whatever the entity count.

The price is that a batch rewrites whole shards, not only the entities it touched; each
entity's text is compressed on its own (zlib level 1: a job's ~5.6 KB to ~1.2 KB) so an
untouched entity is copied as bytes, never decoded or compressed again.

Layout: ``MAGIC`` then, per entity, a 4-byte big-endian length and the UTF-8 entity,
a 4-byte length and the compressed text.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

MAGIC = b"FWP1"
_LEN = struct.Struct(">I")
_LEVEL = 1


class PackError(ValueError):
    """A shard value that is not this layout (another release's, or damaged)."""


def unpack(blob: bytes) -> dict[str, bytes]:
    """Entity → compressed text, as :func:`pack` wrote them."""
    if blob[: len(MAGIC)] != MAGIC:
        msg = f"not a packed shard (starts {bytes(blob[:4])!r})"
        raise PackError(msg)
    view = memoryview(blob)
    out: dict[str, bytes] = {}
    at, end = len(MAGIC), len(blob)
    try:
        while at < end:
            (n,) = _LEN.unpack_from(view, at)
            entity = str(view[at + 4 : at + 4 + n], "utf-8")
            at += 4 + n
            (n,) = _LEN.unpack_from(view, at)
            out[entity] = bytes(view[at + 4 : at + 4 + n])
            at += 4 + n
    except (struct.error, UnicodeDecodeError) as exc:
        msg = f"damaged packed shard at byte {at}: {exc}"
        raise PackError(msg) from exc
    if at != end:
        msg = f"damaged packed shard: {at - end} bytes short"
        raise PackError(msg)
    return out


def pack(entities: dict[str, bytes]) -> bytes:
    """The value of a shard holding ``entities`` (entity → compressed text)."""
    parts = [MAGIC]
    for entity, data in entities.items():
        key = entity.encode("utf-8")
        parts += (_LEN.pack(len(key)), key, _LEN.pack(len(data)), data)
    return b"".join(parts)


class PackedStore:
    """A :class:`~streaming.runner.ShardStore` over one packed shard value.

    The value is read once, on first use, and only the entities asked for are
    decompressed; the others are written back as the bytes they were.

    Args:
        load: Reads the shard's value (``None``: the shard has none yet).
    """

    def __init__(self, load: Callable[[], bytes | None]) -> None:
        self._load = load
        self._entities: dict[str, bytes] | None = None
        self.dirty = False
        self.damaged: PackError | None = None

    def _all(self) -> dict[str, bytes]:
        if self._entities is None:
            blob = self._load()
            try:
                self._entities = unpack(blob) if blob else {}
            except PackError as exc:
                # Its entities start again from their next events; the shell reports it.
                self._entities, self.damaged, self.dirty = {}, exc, True
        return self._entities

    def get(self, entity: str) -> str | None:
        """The entity's saved text, if any."""
        data = self._all().get(entity)
        return None if data is None else zlib.decompress(data).decode("utf-8")

    def put(self, entity: str, text: str) -> None:
        """Save the entity's text."""
        self._all()[entity] = zlib.compress(text.encode("utf-8"), _LEVEL)
        self.dirty = True

    def delete(self, entity: str) -> None:
        """Forget the entity."""
        if self._all().pop(entity, None) is not None:
            self.dirty = True

    def value(self) -> bytes | None:
        """The shard's value to write back (``None``: no entity left)."""
        entities = self._all()
        return pack(entities) if entities else None
