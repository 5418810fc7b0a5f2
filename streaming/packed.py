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


class EntityDamaged(PackError):
    """One entity's bytes in a readable shard that do not decompress to its text.

    Attributes:
        entity: The entity.
    """

    def __init__(self, entity: str, msg: str) -> None:
        super().__init__(msg)
        self.entity = entity


def unpack(blob: bytes) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The shard's meta and entity → compressed text, as :func:`pack` wrote them.

    Raises:
        PackError: the value is not of this layout, or damaged.
    """
    meta, out, error = _read(blob)
    if error is not None:
        raise error
    return meta or {}, out


def _read(
    blob: bytes,
) -> tuple[dict[str, Any] | None, dict[str, bytes], PackError | None]:
    """What can be read of a shard value: its meta, the entities up to any damage, the error.

    The meta is ``None`` when it cannot be read; entities after a damaged one cannot be
    found (each is found by the lengths before it).
    """
    if blob[: len(MAGIC)] != MAGIC:
        msg = f"not a packed shard (starts {bytes(blob[:4])!r})"
        return None, {}, PackError(msg)
    view = memoryview(blob)
    out: dict[str, bytes] = {}
    meta: dict[str, Any] | None = None
    at, end = len(MAGIC), len(blob)
    try:
        (n,) = _LEN.unpack_from(view, at)
        if at + 4 + n > end:
            msg = f"the meta's {n} bytes run past the end"
            raise ValueError(msg)
        at += 4 + n
        try:
            head = json.loads(bytes(view[at - n : at]))
        except ValueError as exc:
            msg = f"the meta is not JSON ({exc})"
            raise _MetaError(msg) from exc
        if not isinstance(head, dict):
            msg = "the meta is not an object"
            raise _MetaError(msg)
        meta = head
        while at < end:
            (n,) = _LEN.unpack_from(view, at)
            entity = str(view[at + 4 : at + 4 + n], "utf-8")
            at += 4 + n
            (n,) = _LEN.unpack_from(view, at)
            if at + 4 + n > end:
                msg = f"{entity}: its {n} bytes run past the end"
                raise ValueError(msg)
            out[entity] = bytes(view[at + 4 : at + 4 + n])
            at += 4 + n
    except _MetaError as exc:
        # The entities after an unreadable meta are still where its length says.
        _empty, rest, error = _read(MAGIC + _LEN.pack(2) + b"{}" + bytes(view[at:]))
        msg = f"damaged packed shard: {exc}" + (f"; then {error}" if error else "")
        return None, rest, PackError(msg)
    except (struct.error, ValueError) as exc:  # JSON and UTF-8 errors are ValueErrors
        msg = f"damaged packed shard at byte {at}: {exc}"
        return meta, out, PackError(msg)
    return meta, out, None


class _MetaError(ValueError):
    """The shard's meta cannot be read, but its length could."""


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
    bytes they were. A value that cannot be read whole keeps what can be read, with
    :attr:`damaged` set: the entities before the damage, each still due when it was (due
    at once when the wake-up table itself is lost); the ones the table names but whose
    bytes are lost are in :attr:`lost` (their incidents are closed by the driver, from
    the ledger). One entity whose bytes do not decompress raises :class:`EntityDamaged`
    when asked for; the others are read as usual.

    Args:
        blob: The shard's value (``None``: the shard has none yet).
    """

    def __init__(self, blob: bytes | None) -> None:
        self.damaged: PackError | None = None
        self.lost: list[str] = []
        #: The value was damaged where it says which entities it holds: those not read
        #: cannot be named.
        self.unnamed = False
        self.meta: dict[str, Any]
        self._entities: dict[str, bytes]
        if not blob:
            self.meta, self._entities = {}, {}
        else:
            meta, self._entities, self.damaged = _read(blob)
            self.meta = meta or {}
            self.unnamed = self.damaged is not None and meta is None
        if self.damaged is not None:
            wakes: dict[str, Any] = dict(self.meta.get("wakes") or {})
            self.lost = sorted(e for e in wakes if e not in self._entities)
            for e in self.lost:
                del wakes[e]
            for e in self._entities:
                # Due at any watermark: the entity's turn says when it is due next.
                wakes.setdefault(e, [0, 0])
            self.meta = {**self.meta, "wakes": wakes}
        self.dirty = self.damaged is not None

    def entities(self) -> list[str]:
        """The entities the shard holds (as read: none after a damage are known)."""
        return list(self._entities)

    def get(self, entity: str) -> str | None:
        """The entity's saved text, if any.

        Raises:
            EntityDamaged: its bytes do not decompress to UTF-8 text.
        """
        data = self._entities.get(entity)
        if data is None:
            return None
        try:
            return zlib.decompress(data).decode("utf-8")
        except (zlib.error, UnicodeDecodeError) as exc:
            msg = f"{entity}: its saved value is damaged ({type(exc).__name__}: {exc})"
            raise EntityDamaged(entity, msg) from exc

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
