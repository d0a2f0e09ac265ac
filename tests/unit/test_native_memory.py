import asyncio

import pytest

from app import native_memory


def test_zero_keeps_glibcs_default_and_a_cap_is_applied_on_glibc():
    assert native_memory.limit_arenas(0) is False
    assert native_memory.limit_arenas(8) is native_memory.available()


def test_trim_says_whether_it_gave_pages_back():
    junk = [bytearray(1 << 20) for _ in range(32)]
    del junk
    assert isinstance(native_memory.trim(), bool)


async def test_the_trimmer_runs_on_its_interval_off_the_loop_and_stops():
    if not native_memory.available():
        pytest.skip("not glibc")
    trimmer = native_memory.HeapTrimmer(0.01)
    assert trimmer.start()
    for _ in range(200):
        if trimmer.stats.runs >= 2:
            break
        await asyncio.sleep(0.01)
    await trimmer.stop()
    runs = trimmer.stats.runs
    assert runs >= 2 and trimmer.stats.max_seconds >= trimmer.stats.last_seconds > 0
    await asyncio.sleep(0.05)
    assert trimmer.stats.runs == runs  # stopped for good
    await trimmer.stop()  # twice is harmless


def test_a_non_positive_interval_is_refused():
    with pytest.raises(ValueError):
        native_memory.HeapTrimmer(0)
