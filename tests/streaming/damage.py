"""A fault for the detect query's tests: one entity's saved bytes damaged as its shard is read.

Spark pickles the processor to its Python workers by reference, so the fault lives in a
module they can import, not in the test.
"""

from __future__ import annotations

from streaming.packed import pack, unpack
from streaming.processor import ShardProcessor

#: The entity whose bytes are damaged.
VICTIM = "job:" + "d" * 32


class DamagingProcessor(ShardProcessor):
    """:class:`ShardProcessor` reading :data:`VICTIM`'s bytes as bytes zlib cannot read."""

    def _packed(self) -> bytes | None:
        blob = super()._packed()
        if blob is None:
            return None
        meta, data = unpack(blob)
        if VICTIM in data:
            data[VICTIM] = b"\x78\x01damaged on disk"
        return pack(meta, data)
