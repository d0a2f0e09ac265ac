"""Draining on the real engines (what ``serve`` does on SIGTERM): a turn in flight finishes, then its connection
closes with 1001; an idle session closes at once; a turn that outlasts the bound is closed with 1001 and its
engine work stops. A second server on the shared stack is drained, so the shared one goes on serving."""

from __future__ import annotations

import asyncio

import pytest

from sub250.gateway import ApiKeys, GatewayLimits
from sub250.sdk import RealtimeClient
from sub250.sdk.client import ConnectionLost
from sub250.server import DRAIN_CLOSE_CODE, Server
from tests.e2e.helpers import LLM_ANSWERS

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"
LONG_QUESTION = "Tell me everything about the warranty, the returns, the filters and the delivery, in detail."


async def until_closed(client: RealtimeClient, timeout: float = 15) -> list:
    """Every event until the server closes the connection."""
    seen = []
    with pytest.raises(ConnectionLost):
        while True:
            seen.append(await client.next_event(timeout=timeout))
    return seen


@pytest.fixture
async def second_server(server, stack):
    srv = Server("127.0.0.1", 0, keys=ApiKeys([TEST_KEY]), limits=GatewayLimits(), replica="drained")
    await srv.listen()
    srv.attach(stack)  # the shared engines (the `server` fixture set stack.llm)
    yield srv
    await srv.close()


async def test_a_turn_in_flight_finishes_before_its_connection_closes_1001(second_server):
    url = f"ws://127.0.0.1:{second_server.port}/v1/realtime"
    async with RealtimeClient(url, TEST_KEY) as busy, RealtimeClient(url, TEST_KEY) as idle:
        await busy.update_session(output_modalities=["text"], **LLM_ANSWERS)
        await busy.send_text(LONG_QUESTION)
        await busy.wait_for("response.output_text.delta", timeout=60)
        drain = asyncio.ensure_future(second_server.drain(60))
        await until_closed(idle, timeout=5)
        assert idle.ws.close_code == DRAIN_CLOSE_CODE
        assert not drain.done()
        seen = await until_closed(busy, timeout=60)
        done = [e for e in seen if e.type == "response.done"]
        assert done and done[0].data["response"]["status"] == "completed", [e.type for e in seen]
        assert busy.ws.close_code == DRAIN_CLOSE_CODE
        report = await asyncio.wait_for(drain, 10)
    assert (report.closed_idle, report.cut_short) == (2, 0)


async def test_a_turn_that_outlasts_the_bound_is_closed_1001_and_its_work_stops(second_server, stack):
    url = f"ws://127.0.0.1:{second_server.port}/v1/realtime"
    async with RealtimeClient(url, TEST_KEY) as client:
        await client.update_session(output_modalities=["text"], **LLM_ANSWERS,
                                    max_output_tokens="inf")
        await client.send_text(LONG_QUESTION)
        await client.wait_for("response.output_text.delta", timeout=60)
        report = await asyncio.wait_for(second_server.drain(0.3), 10)
        seen = await until_closed(client, timeout=10)
        assert client.ws.close_code == DRAIN_CLOSE_CODE
    assert report.cut_short == 1 and not any(e.type == "response.done" for e in seen)
    # the session's work ended with its connection: the engine has no request of it left
    engine = stack.llm._engine  # vLLM's AsyncLLM (as test_faults.py reads it)
    for _ in range(100):
        if engine.get_num_unfinished_requests() == 0:
            break
        await asyncio.sleep(0.05)
    assert engine.get_num_unfinished_requests() == 0
