"""The native heap: how many glibc malloc arenas the process may open, and giving freed pages back.

The engines run native code on many threads (CTranslate2, onnxruntime, vLLM's front end, the default
executor). glibc gives each thread that meets contention an arena of its own - up to eight per core - and
memory freed inside an arena stays in the process's RSS until the arena's top is free or the heap is
trimmed. Under eight concurrent sessions that is what made the soak's RSS climb for minutes and never come
back (docs/BENCHMARKS.md §16). Two levers, both glibc's own API (``mallopt(M_ARENA_MAX)``, ``malloc_trim``),
called through ``ctypes``:

- :func:`limit_arenas` at start-up, before the engines' threads exist (``Settings.malloc_arena_max``);
- :class:`HeapTrimmer`, a task that calls ``malloc_trim(0)`` on a worker thread every
  ``Settings.malloc_trim_s`` seconds, so pages freed anywhere in the heap go back to the system.

On a C library other than glibc (musl, macOS) both are no-ops that say so.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import platform
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: ``mallopt`` parameter number of ``M_ARENA_MAX`` in glibc's ``<malloc.h>``.
M_ARENA_MAX = -8


def _libc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL(None)  # the process's own symbols: glibc is already loaded
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    libc.malloc_trim.argtypes = (ctypes.c_size_t,)
    libc.malloc_trim.restype = ctypes.c_int
    return libc


_LIBC = _libc()


def available() -> bool:
    """Whether this process runs on glibc (the levers below do something)."""
    return _LIBC is not None


def limit_arenas(count: int) -> bool:
    """Cap glibc's malloc arenas at ``count`` (0 keeps glibc's default). True when applied."""
    if count <= 0 or _LIBC is None:
        return False
    if _LIBC.mallopt(M_ARENA_MAX, count) != 1:
        log.warning("mallopt(M_ARENA_MAX, %d) was refused; glibc's default arena count stays", count)
        return False
    return True


def trim() -> bool:
    """Give free pages of every arena back to the system (``malloc_trim(0)``). True when some were."""
    return bool(_LIBC.malloc_trim(0)) if _LIBC is not None else False


@dataclass
class TrimStats:
    runs: int = 0
    released: int = 0
    last_seconds: float = 0.0
    max_seconds: float = 0.0


class HeapTrimmer:
    """Calls :func:`trim` every ``interval_s`` seconds on a worker thread (never on the event loop)."""

    def __init__(self, interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.interval_s = interval_s
        self.stats = TrimStats()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> bool:
        if _LIBC is None:
            log.info("not glibc: the heap is not trimmed")
            return False
        self._task = asyncio.get_running_loop().create_task(self._run(), name="heap-trimmer")
        return True

    async def trim_once(self) -> None:
        t0 = time.perf_counter()
        released = await asyncio.to_thread(trim)
        took = time.perf_counter() - t0
        s = self.stats
        s.runs += 1
        s.released += released
        s.last_seconds = took
        s.max_seconds = max(s.max_seconds, took)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.trim_once()

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
