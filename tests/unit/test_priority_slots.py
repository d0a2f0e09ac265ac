"""PrioritySlots: so many holders at once; on release the most urgent waiter (then the earliest) gets the slot;
background work that leaves a slot free never takes the last one; cancelled waiters are skipped, and one
cancelled as it was handed a slot hands it on."""

import asyncio

import pytest

from sub250.priority_slots import PrioritySlots


async def hold(lock, urgency, order, name, leave_free=0, until=None):
    await lock.acquire(urgency, leave_free=leave_free)
    order.append(name)
    await (until.wait() if until is not None else asyncio.sleep(0))
    lock.release()


async def test_the_first_caller_gets_it_at_once_and_release_frees_it():
    lock = PrioritySlots()
    assert lock.held == 0
    await asyncio.wait_for(lock.acquire(5), 1)
    assert lock.held == 1 and lock.waiting == 0
    lock.release()
    assert lock.held == 0


async def test_release_of_a_free_lock_is_an_error():
    with pytest.raises(RuntimeError, match="no slot held"):
        PrioritySlots().release()
    with pytest.raises(ValueError, match="at least one slot"):
        PrioritySlots(0)


async def test_waiters_are_served_by_urgency_then_arrival():
    lock, order = PrioritySlots(), []
    await lock.acquire(0)
    tasks = [asyncio.ensure_future(hold(lock, u, order, name)) for name, u in
             [("b3", 3), ("c1", 1), ("d3", 3), ("e0", 0), ("f1", 1)]]
    await asyncio.sleep(0.01)
    assert lock.waiting == 5
    lock.release()
    await asyncio.gather(*tasks)
    assert order == ["e0", "c1", "f1", "b3", "d3"]
    assert lock.held == 0


async def test_fifo_ignores_urgency():
    lock, order = PrioritySlots(fifo=True), []
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
    lock, order = PrioritySlots(), []
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
    assert lock.held == 0 and lock.waiting == 0


async def test_a_callable_urgency_is_read_at_release():
    lock, order, now = PrioritySlots(), [], {"u": 9}
    await lock.acquire(0)
    tasks = [asyncio.ensure_future(hold(lock, 5, order, "fixed")),
             asyncio.ensure_future(hold(lock, lambda: now["u"], order, "moving"))]
    await asyncio.sleep(0.01)
    now["u"] = 1
    lock.release()
    await asyncio.gather(*tasks)
    assert order == ["moving", "fixed"]


async def test_two_slots_two_holders_the_third_waits():
    lock, order, go = PrioritySlots(2), [], asyncio.Event()
    tasks = [asyncio.ensure_future(hold(lock, 0, order, name, until=go)) for name in "abc"]
    await asyncio.sleep(0.01)
    assert order == ["a", "b"] and lock.held == 2 and lock.waiting == 1
    go.set()
    await asyncio.gather(*tasks)
    assert order == ["a", "b", "c"] and lock.held == 0


async def test_background_work_never_takes_the_last_slot():
    """Two slots: a partial (leave_free=1) runs only when both are free; urgent work gets the second at once."""
    lock, order = PrioritySlots(2), []
    partial_done, final_done = asyncio.Event(), asyncio.Event()
    partial = asyncio.ensure_future(hold(lock, 3, order, "partial", leave_free=1, until=partial_done))
    await asyncio.sleep(0.01)
    assert order == ["partial"] and not lock.free(leave_free=1) and lock.free()
    final = asyncio.ensure_future(hold(lock, 0, order, "final", until=final_done))
    await asyncio.sleep(0.01)
    assert order == ["partial", "final"], "the final did not wait behind the partial"
    second_partial = asyncio.ensure_future(hold(lock, 3, order, "partial 2", leave_free=1))
    await asyncio.sleep(0.01)
    partial_done.set()
    await asyncio.sleep(0.01)
    assert order == ["partial", "final"], "one slot free is not enough for background work"
    final_done.set()
    await asyncio.gather(partial, final, second_partial)
    assert order == ["partial", "final", "partial 2"] and lock.held == 0


async def test_urgent_work_is_not_held_back_by_background_work_waiting_for_two_slots():
    lock, order, go = PrioritySlots(2), [], asyncio.Event()
    running = asyncio.ensure_future(hold(lock, 0, order, "running", until=go))
    await asyncio.sleep(0.01)
    waiting = asyncio.ensure_future(hold(lock, 3, order, "background", leave_free=1))
    urgent = asyncio.ensure_future(hold(lock, 0, order, "urgent"))
    await asyncio.wait_for(urgent, 1)
    assert order == ["running", "urgent"]
    go.set()
    await asyncio.gather(running, waiting)
    assert order == ["running", "urgent", "background"]


async def test_a_slot_held_until_done_is_given_back_when_the_work_ends_not_when_its_caller_stops_waiting():
    lock = PrioritySlots(1)
    finish = asyncio.Event()

    async def work():
        await finish.wait()
        return "done"

    await lock.acquire(0)
    caller = asyncio.ensure_future(lock.hold_until_done(work))
    await asyncio.sleep(0.01)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert lock.held == 1, "the work still runs: its slot stays taken"
    nxt = asyncio.ensure_future(lock.acquire(0))
    await asyncio.sleep(0.01)
    assert not nxt.done()
    finish.set()
    await asyncio.sleep(0.01)
    assert nxt.done() and lock.held == 1, "the slot is handed on once the work has finished"
    lock.release()
    assert lock.held == 0

    await lock.acquire(0)
    assert await lock.hold_until_done(lambda: asyncio.sleep(0, result=7)) == 7 and lock.held == 0

    async def fails():
        raise ValueError("engine")

    await lock.acquire(0)
    with pytest.raises(ValueError):
        await lock.hold_until_done(fails)
    assert lock.held == 0, "work that fails gives its slot back"

    def refuses():
        raise RuntimeError("could not start")

    await lock.acquire(0)
    with pytest.raises(RuntimeError):
        await lock.hold_until_done(refuses)
    assert lock.held == 0, "work that never started gives its slot back"
