"""An asyncio lock whose waiters are served by urgency, then by arrival: an engine shared by every session (one
Whisper call at a time) serves a caller who waits for a reply before a partial transcript nobody waits for.

A waiter's urgency may be a callable, read each time the lock is handed on: a reply prepared at a pause asks as
speculative work and is served as committed work once the commit adopts it, without asking again.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

#: A number (lower is served first), or a callable giving the current one.
Urgency = int | Callable[[], int]


@dataclass(eq=False)
class _Waiter:
    urgency: Urgency
    order: int
    granted: asyncio.Future[None] = field(repr=False)

    def key(self) -> tuple[int, int]:
        urgency = self.urgency() if callable(self.urgency) else self.urgency
        return int(urgency), self.order


class PriorityLock:
    """Like :class:`asyncio.Lock`, but ``acquire(urgency)``: when released, the waiter with the lowest urgency
    (then the earliest) gets it. ``fifo=True`` ignores urgency (arrival order only, asyncio.Lock's behaviour):
    the configuration to compare against."""

    def __init__(self, *, fifo: bool = False) -> None:
        self.fifo = fifo
        self._held = False
        self._waiters: list[_Waiter] = []
        self._order = itertools.count()

    def locked(self) -> bool:
        """Held, or promised to a waiter that has not resumed yet."""
        return self._held

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self, urgency: Urgency = 0) -> None:
        if not self._held and not self._waiters:
            self._held = True
            return
        waiter = _Waiter(urgency, next(self._order), asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            await waiter.granted
        except asyncio.CancelledError:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.granted.done() and not waiter.granted.cancelled():
                self.release()  # handed to us as we were cancelled: hand it on
            raise

    def release(self) -> None:
        if not self._held:
            raise RuntimeError("PriorityLock.release() of a lock that is not held")
        self._held = False
        # a waiter cancelled but not yet resumed has its future cancelled already: it is not served
        self._waiters = [w for w in self._waiters if not w.granted.done()]
        if not self._waiters:
            return
        chosen = self._waiters[0] if self.fifo else min(self._waiters, key=_Waiter.key)
        self._waiters.remove(chosen)
        self._held = True
        chosen.granted.set_result(None)
