"""The tasks a session or a call starts, owned in one place: a strong reference to each (the event loop keeps
only weak ones), every failure logged (and reported to ``on_error``), and one call that stops them all when the
connection goes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


class TaskSet:
    def __init__(self, on_error: Callable[[BaseException], None] | None = None) -> None:
        self._tasks: set[asyncio.Task] = set()
        self._on_error = on_error

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("task %s failed", task.get_name(), exc_info=exc)
            if self._on_error is not None:
                self._on_error(exc)

    async def cancel_all(self) -> None:
        """Cancel every task and wait until each has really ended (their cleanup - engine aborts - included)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
