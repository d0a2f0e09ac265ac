"""PriorityLock: one holder; on release the most urgent waiter (then the earliest) gets it; cancelled waiters are
skipped, and one cancelled as it was handed the lock hands it on."""

import asyncio

import pytest

from app.priority_lock import PriorityLock


async def hold(lock, urgency, order, name, release=True):
    await lock.acquire(urgency)
    order.append(name)
    if release:
        await asyncio.sleep(0)
        lock.release()


async def test_the_first_caller_gets_it_at_once_and_release_frees_it():
    lock = PriorityLock()
    assert not lock.locked()
    await asyncio.wait_for(lock.acquire(5), 1)
    assert lock.locked() and lock.waiting == 0
    lock.release()
    assert not lock.locked()


async def test_release_of_a_free_lock_is_an_error():
    with pytest.raises(RuntimeError, match="not held"):
        PriorityLock().release()


async def test_waiters_are_served_by_urgency_then_arrival():
    lock, order = PriorityLock(), []
    await lock.acquire(0)
    tasks = [asyncio.ensure_future(hold(lock, u, order, name)) for name, u in
             [("b3", 3), ("c1", 1), ("d3", 3), ("e0", 0), ("f1", 1)]]
    await asyncio.sleep(0.01)
    assert lock.waiting == 5
    lock.release()
    await asyncio.gather(*tasks)
    assert order == ["e0", "c1", "f1", "b3", "d3"]
    assert not lock.locked()


async def test_fifo_ignores_urgency():
    lock, order = PriorityLock(fifo=True), []
    await lock.acquire(0)
    tasks = [asyncio.ensure_future(hold(lock, u, order, name)) for name, u in [("a", 3), ("b", 0), ("c", 1)]]
    await asyncio.sleep(0.01)
    lock.release()
    await asyncio.gather(*tasks)
    assert order == ["a", "b", "c"]


@pytest.mark.parametrize("when", ["before the release", "as it is handed the lock"])
async def test_a_cancelled_waiter_is_skipped_or_hands_the_lock_on(when):
    """Cancelled while waiting: skipped at the release. Cancelled after the release chose it but before it
    resumed: it hands the lock on."""
    lock, order = PriorityLock(), []
    await lock.acquire(0)
    urgent = asyncio.ensure_future(hold(lock, 0, order, "urgent"))
    later = asyncio.ensure_future(hold(lock, 5, order, "later"))
    await asyncio.sleep(0.01)
    if when == "before the release":
        urgent.cancel()
        lock.release()  # before the cancelled task has even resumed
    else:
        lock.release()  # granted to "urgent", which has not resumed yet...
        urgent.cancel()  # ...and is cancelled before it does
    await asyncio.wait_for(later, 1)
    assert order == ["later"]
    with pytest.raises(asyncio.CancelledError):
        await urgent
    assert not lock.locked() and lock.waiting == 0


async def test_a_callable_urgency_is_read_at_release():
    lock, order, now = PriorityLock(), [], {"u": 9}
    await lock.acquire(0)
    tasks = [asyncio.ensure_future(hold(lock, 5, order, "fixed")),
             asyncio.ensure_future(hold(lock, lambda: now["u"], order, "moving"))]
    await asyncio.sleep(0.01)
    now["u"] = 1
    lock.release()
    await asyncio.gather(*tasks)
    assert order == ["moving", "fixed"]
