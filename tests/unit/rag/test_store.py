"""The store's reads against a database that goes away: a connection lost under a query is retried once on a
fresh one, anything else fails at once, and every read is bounded as a whole (a fake pool, no PostgreSQL)."""

import asyncio
import time

import asyncpg
import numpy as np
import pytest

from sub250.rag.store import VectorStore

ROW = {"id": 1, "source": "product.md", "title": "Filters", "content": "Every nine months.", "distance": 0.25}


class FakeConnection:
    def __init__(self, pool):
        self.pool = pool

    async def fetch(self, sql, *args, timeout=None):
        self.pool.timeouts.append(timeout)
        outcome = self.pool.outcomes.pop(0) if self.pool.outcomes else "ok"
        if outcome == "hang":  # a hung server: only the timeout ends it, as asyncpg's own does
            await asyncio.wait_for(asyncio.Event().wait(), timeout)
        if isinstance(outcome, BaseException):
            raise outcome
        return [ROW]


class FakePool:
    """``outcomes``: one per query, in order: "ok", "hang", or an exception to raise. ``connect``: the same
    for acquiring a connection."""

    def __init__(self, outcomes=(), connect=()):
        self.outcomes, self.connect = list(outcomes), list(connect)
        self.acquired, self.expired, self.timeouts = 0, 0, []

    def acquire(self, *, timeout=None):
        pool = self

        class Context:
            async def __aenter__(self):
                pool.acquired += 1
                outcome = pool.connect.pop(0) if pool.connect else "ok"
                if outcome == "hang":
                    await asyncio.wait_for(asyncio.Event().wait(), timeout)
                if isinstance(outcome, BaseException):
                    raise outcome
                return FakeConnection(pool)

            async def __aexit__(self, *exc):
                return False

        return Context()

    async def expire_connections(self):
        self.expired += 1


def vec():
    return np.ones(384, dtype=np.float32)


async def test_a_search_on_a_healthy_pool_runs_once_within_its_bound():
    pool = FakePool()
    found = await VectorStore(pool).search(vec(), 1)
    assert [p.chunk_id for p in found] == [1] and pool.acquired == 1 and pool.expired == 0
    assert 0 < pool.timeouts[0] <= 2.0


@pytest.mark.parametrize("lost", [
    asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
])
async def test_a_connection_lost_under_a_search_expires_the_pool_and_is_retried_once(lost, caplog):
    pool = FakePool(outcomes=[lost, "ok"])
    found = await VectorStore(pool).search(vec(), 1)
    assert [p.chunk_id for p in found] == [1]
    assert pool.acquired == 2 and pool.expired == 1
    assert "retrying once" in caplog.text


async def test_a_connection_lost_twice_fails_after_one_retry():
    lost = asyncpg.exceptions.ConnectionDoesNotExistError("gone")
    pool = FakePool(outcomes=[lost, lost, "ok"])
    with pytest.raises(asyncpg.exceptions.ConnectionDoesNotExistError):
        await VectorStore(pool).search(vec(), 1)
    assert pool.acquired == 2 and pool.expired == 2


async def test_an_unreachable_server_fails_at_once_without_a_retry():
    pool = FakePool(connect=[FileNotFoundError(2, "No such file or directory")])
    t0 = time.perf_counter()
    with pytest.raises(FileNotFoundError):
        await VectorStore(pool).search(vec(), 1)
    assert time.perf_counter() - t0 < 0.1
    assert pool.acquired == 1


@pytest.mark.parametrize("where", ["connect", "query"])
async def test_a_hung_server_costs_at_most_the_search_bound(where):
    pool = FakePool(**{"connect" if where == "connect" else "outcomes": ["hang"]})
    t0 = time.perf_counter()
    with pytest.raises(asyncio.TimeoutError):
        await VectorStore(pool, search_timeout_s=0.2).search(vec(), 1)
    elapsed = time.perf_counter() - t0
    assert 0.15 < elapsed < 0.6, elapsed
    assert pool.acquired == 1 and pool.expired == 1, "no retry after a timeout; the connections are renewed"


async def test_the_retry_shares_the_first_attempts_time():
    lost = asyncpg.exceptions.ConnectionDoesNotExistError("gone")
    pool = FakePool(outcomes=[lost, "hang"])
    t0 = time.perf_counter()
    with pytest.raises(asyncio.TimeoutError):
        await VectorStore(pool, search_timeout_s=0.2).search(vec(), 1)
    assert time.perf_counter() - t0 < 0.6
    assert pool.timeouts[1] <= pool.timeouts[0] <= 0.2
