import asyncio

import pytest

from sub250 import native_memory


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


def _find(lib):
    return {"jemalloc": "libjemalloc.so.2"}.get(lib)


def test_jemalloc_is_preloaded_once_when_installed_and_wanted():
    env = native_memory.jemalloc_environ("auto", {"LD_PRELOAD": "/x/libiomp5.so", "PATH": "/bin"}, _find)
    assert env["LD_PRELOAD"] == "libjemalloc.so.2:/x/libiomp5.so" and env["PATH"] == "/bin"
    assert env["MALLOC_CONF"] == native_memory.JEMALLOC_CONF and env[native_memory.RESTARTED] == "1"
    assert native_memory.jemalloc_environ("auto", env, _find) is None  # the restarted process goes on
    assert native_memory.jemalloc_environ("auto", {"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}, _find) is None
    mine = native_memory.jemalloc_environ("jemalloc", {"MALLOC_CONF": "narenas:2"}, _find)
    assert mine["MALLOC_CONF"] == "narenas:2" and mine["LD_PRELOAD"] == "libjemalloc.so.2"  # the user's settings


def test_glibc_or_a_missing_jemalloc_keep_the_process_as_it_is():
    from sub250.errors import ConfigError

    assert native_memory.jemalloc_environ("glibc", {}, _find) is None
    assert native_memory.jemalloc_environ("auto", {}, lambda lib: None) is None
    with pytest.raises(ConfigError, match="libjemalloc is not installed"):
        native_memory.jemalloc_environ("jemalloc", {}, lambda lib: None)
    with pytest.raises(ConfigError, match="not an allocator"):
        native_memory.jemalloc_environ("tcmalloc", {}, _find)


def test_the_allocator_in_use_is_named():
    assert native_memory.allocator() in ("jemalloc", "glibc", "other")
    assert native_memory.available() is (native_memory.allocator() == "glibc")

