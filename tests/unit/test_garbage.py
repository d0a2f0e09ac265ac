import asyncio
import gc

import pytest

from sub250.garbage import GarbageCollector, freeze_loaded


class Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic collector frees it
        self.payload = bytearray(1024)


@pytest.fixture
def unfrozen():
    yield
    gc.unfreeze()


def test_freezing_moves_what_is_loaded_out_of_the_collector_s_sight(unfrozen):
    loaded = [Node() for _ in range(10)]
    frozen = freeze_loaded()
    assert frozen >= 10 and gc.get_freeze_count() > 0
    assert not any(gc.is_finalized(n) for n in loaded)
    del loaded


async def test_the_collector_frees_cycles_on_its_timer_and_stops(unfrozen):
    freeze_loaded()
    gc.disable()  # only the collector's own runs count here
    try:
        collector = GarbageCollector(0.05)
        collector.start()
        for _ in range(50):
            Node()
        await asyncio.sleep(0.3)
        assert collector.stats.runs >= 2 and collector.stats.total >= 50
        assert 0 < collector.stats.max_seconds < 1.0
        await collector.stop()
        runs = collector.stats.runs
        await asyncio.sleep(0.15)
        assert collector.stats.runs == runs
        await collector.stop()  # twice: nothing
    finally:
        gc.enable()


@pytest.mark.parametrize("interval", [0, -1, float("nan")])
def test_an_interval_must_be_positive(interval):
    with pytest.raises(ValueError):
        GarbageCollector(interval)
