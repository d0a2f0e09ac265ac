"""A chore run every few seconds as a task of the running loop, with how long its runs took: the heap
trimmer (app/native_memory.py) and the garbage collector (app/garbage.py)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

__all__ = ["Periodic", "RunStats"]


@dataclass
class RunStats:
    runs: int = 0
    #: what the runs found or freed, added up (the chore's own measure)
    total: int = 0
    last_seconds: float = 0.0
    max_seconds: float = 0.0


class Periodic:
    """Awaits :meth:`run_once` every ``interval_s`` seconds from :meth:`start` until :meth:`stop`."""

    name = "periodic"

    def __init__(self, interval_s: float) -> None:
        if not interval_s > 0:
            raise ValueError("interval_s must be > 0")
        self.interval_s = interval_s
        self.stats = RunStats()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> bool:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
        return True

    async def once(self) -> int:
        """One run of the chore; returns what it found or freed (added to ``stats.total``)."""
        raise NotImplementedError

    async def run_once(self) -> None:
        t0 = time.perf_counter()
        found = await self.once()
        took = time.perf_counter() - t0
        s = self.stats
        s.runs += 1
        s.total += found
        s.last_seconds = took
        s.max_seconds = max(s.max_seconds, took)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.run_once()

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
