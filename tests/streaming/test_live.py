"""The Spark session of a live run (``streaming/live.py``): task slots for its queries."""

from __future__ import annotations


def test_real_time_parsing_pins_a_slot_per_raw_partition() -> None:
    from conf import AppConfig
    from streaming.live import query_slots

    cfg = AppConfig()
    # 4 raw partitions pinned, then max(bus partitions 2, state partitions 2), then 1.
    assert query_slots(cfg, 4) == 7
    micro = AppConfig.model_validate({"spark": {"parse_mode": "microbatch"}})
    assert query_slots(micro, 4) == 3
