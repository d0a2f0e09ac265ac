"""What every CPU-heavy engine shares: its own worker threads, so its blocking calls never run on the event
loop and never queue behind another engine's in a common pool.

An engine subclass calls ``super().__init__(workers=N)``; callers ``await engine.run(fn, *args)`` to run a
blocking call of it on those threads. ``close()`` lets the threads go.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class ThreadedEngine:
    name = "engine"

    def __init__(self, workers: int = 1) -> None:
        self._workers = workers
        self._executor: ThreadPoolExecutor | None = None

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` on this engine's threads and return its result."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix=self.name)
        call = functools.partial(fn, *args, **kwargs) if args or kwargs else fn
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def close_threads(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
