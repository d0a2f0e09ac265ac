"""TaskSet: the session's tasks, owned in one place."""

import asyncio
import gc
import logging
import weakref

from sub250.tasks import TaskSet


async def test_spawn_keeps_a_strong_reference_until_the_task_ends():
    """The loop keeps only weak references: a task waiting on a future nobody else holds is collected unless
    the TaskSet holds it."""
    tasks, cleaned = TaskSet(), []

    async def orphan():
        try:
            await asyncio.get_running_loop().create_future()  # referenced by this task alone
        finally:
            cleaned.append(True)

    alive = weakref.ref(tasks.spawn(orphan()))
    assert len(tasks) == 1
    await asyncio.sleep(0)
    gc.collect()
    assert alive() is not None, "the task was collected while it waited"
    await tasks.cancel_all()
    assert cleaned == [True] and len(tasks) == 0, "a finished task is let go"


async def test_spawn_returns_the_task():
    tasks = TaskSet()

    async def answer():
        return 42

    task = tasks.spawn(answer())
    assert await task == 42


async def test_a_failed_task_is_logged_with_its_exception(caplog):
    tasks = TaskSet()

    async def boom():
        raise ValueError("the partial blew up")

    with caplog.at_level(logging.ERROR, logger="sub250.tasks"):
        task = tasks.spawn(boom())
        await asyncio.wait([task])
        await asyncio.sleep(0)
    failed = [r for r in caplog.records if r.name == "sub250.tasks" and r.levelno == logging.ERROR]
    assert len(failed) == 1
    assert isinstance(failed[0].exc_info[1], ValueError) and "the partial blew up" in str(failed[0].exc_info[1])
    assert len(tasks) == 0


async def test_cancelled_and_successful_tasks_are_not_logged(caplog):
    tasks = TaskSet()

    async def forever():
        await asyncio.Event().wait()

    async def fine():
        return 1

    with caplog.at_level(logging.DEBUG, logger="sub250.tasks"):
        a, b = tasks.spawn(forever()), tasks.spawn(fine())
        await asyncio.sleep(0)
        a.cancel()
        await asyncio.wait([a, b])
        await asyncio.sleep(0)
    assert [r for r in caplog.records if r.name == "sub250.tasks"] == []
    assert len(tasks) == 0


async def test_cancel_all_waits_for_the_cleanup_in_finally_blocks():
    tasks, cleaned, started = TaskSet(), [], asyncio.Event()

    async def reply(name):
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.01)  # e.g. aborting the engine request
            cleaned.append(name)

    for name in ("a", "b", "c"):
        tasks.spawn(reply(name))
    await started.wait()
    await tasks.cancel_all()
    assert sorted(cleaned) == ["a", "b", "c"]
    assert len(tasks) == 0


async def test_cancel_all_with_failing_and_finished_tasks_does_not_raise(caplog):
    tasks = TaskSet()

    async def boom():
        raise RuntimeError("x")

    async def fine():
        return 1

    with caplog.at_level(logging.ERROR, logger="sub250.tasks"):
        tasks.spawn(boom())
        tasks.spawn(fine())
        await tasks.cancel_all()
        await asyncio.sleep(0)
    assert len(tasks) == 0
    await TaskSet().cancel_all()  # nothing to cancel


async def test_on_error_hears_of_a_failed_task():
    heard = []
    tasks = TaskSet(on_error=heard.append)

    async def boom():
        raise ValueError("broken")

    task = tasks.spawn(boom())
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)
    assert [type(e) for e in heard] == [ValueError] and len(tasks) == 0
