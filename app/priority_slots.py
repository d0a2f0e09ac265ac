"""Slots of an engine shared by every session (Whisper's concurrent calls), handed to waiting callers by urgency,
then by arrival: a caller who waits for a reply is served before a partial transcript nobody waits for.

A waiter's urgency may be a callable, read each time a slot frees: a reply prepared at a pause asks as
speculative work and is served as committed work once the commit adopts it, without asking again. A caller may
ask to ``leave_free`` slots: background work that never takes the last slot, so urgent work never waits behind it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

#: A number (lower is served first), or a callable giving the current one.
Urgency = int | Callable[[], int]


@dataclass(eq=False)
class _Waiter:
    urgency: Urgency
    leave_free: int
    order: int
    #: Set once the waiter holds a slot.
    granted: asyncio.Future[None] = field(repr=False)

    def key(self) -> tuple[int, int]:
        urgency = self.urgency() if callable(self.urgency) else self.urgency
        return int(urgency), self.order


class PrioritySlots:
    """``slots`` holders at once. ``acquire(urgency, leave_free=n)`` returns once a slot is free with ``n`` more
    left free beside it, and no more urgent (or, as urgent, earlier) waiter can take it; ``release()`` hands
    the slot on. ``fifo=True`` ignores urgency (arrival order, asyncio.Lock's behaviour): the configuration to
    compare against."""

    def __init__(self, slots: int = 1, *, fifo: bool = False) -> None:
        if slots < 1:
            raise ValueError(f"PrioritySlots needs at least one slot, not {slots}")
        self.slots = slots
        self.fifo = fifo
        self._held = 0
        self._waiters: list[_Waiter] = []
        self._order = itertools.count()

    @property
    def held(self) -> int:
        """Slots held, or promised to a waiter that has not resumed yet."""
        return self._held

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def free(self, leave_free: int = 0) -> bool:
        """A caller asking to leave ``leave_free`` slots would get one now, with nobody waiting before it."""
        return not self._waiters and self.slots - self._held > leave_free

    async def acquire(self, urgency: Urgency = 0, *, leave_free: int = 0) -> None:
        """Wait until a slot is held (give it back with :meth:`release`)."""
        waiter = _Waiter(urgency, leave_free, next(self._order), asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        self._hand_on()  # granted at once when it is first in line and a slot is free for it
        try:
            await waiter.granted
        except asyncio.CancelledError:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                self._hand_on()  # it may have held back a waiter that leaves fewer slots free
            elif waiter.granted.done() and not waiter.granted.cancelled():
                self.release()  # handed a slot as we were cancelled: hand it on
            raise

    async def hold_until_done(self, start: Callable[[], Awaitable[T]]) -> T:
        """With a slot held (``acquire`` returned): start the work and give the slot back when it has
        really finished, not when its caller stops waiting. A caller cancelled returns at once, while work that
        cannot be stopped (a call on an engine's thread) keeps its slot, and the next waiter waits, until done."""
        try:
            running = asyncio.ensure_future(start())
        except BaseException:
            self.release()
            raise
        running.add_done_callback(lambda _: self.release())
        return await asyncio.shield(running)

    def release(self) -> None:
        if self._held <= 0:
            raise RuntimeError("PrioritySlots.release() with no slot held")
        self._held -= 1
        self._hand_on()

    def _hand_on(self) -> None:
        # a waiter cancelled but not yet resumed has its future cancelled already: it is not served
        self._waiters = [w for w in self._waiters if not w.granted.done()]
        while self._waiters:
            free = self.slots - self._held
            queue = self._waiters if self.fifo else sorted(self._waiters, key=_Waiter.key)
            first = queue[0]
            if free <= first.leave_free:
                return  # the first in line waits for a slot; nobody behind it jumps ahead
            self._waiters.remove(first)
            self._held += 1
            first.granted.set_result(None)
