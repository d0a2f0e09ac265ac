"""Bad input gets the right error; the session, and a second concurrent session, keep working."""

import asyncio
import base64
import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from sub250.sdk import RealtimeClient

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"


async def expect_error(client, raw, code):
    await client.ws.send(raw)
    ev = await client.wait_for("error", timeout=10)
    assert ev.error_code == code, ev.data
    return ev


async def test_bad_input_errors_and_sessions_survive(ws_url):
    async with RealtimeClient(ws_url, TEST_KEY) as a, RealtimeClient(ws_url, TEST_KEY) as b:
        await a.update_session(output_modalities=["text"])
        await b.update_session(output_modalities=["text"])
        # b works while a misbehaves
        b_turn = asyncio.ensure_future(b.send_text("How many years is the motor guaranteed for?"))
        await expect_error(a, "{this is not json", "invalid_json")
        ev = await expect_error(a, json.dumps({"type": "input_audio_buffer.explode", "event_id": "evt_42"}),
                                "unknown_event_type")
        assert ev.data["error"]["event_id"] == "evt_42" and ev.data["error"]["param"] == "type"
        odd = base64.b64encode(b"\x00\x01\x02").decode()
        await expect_error(a, json.dumps({"type": "input_audio_buffer.append", "audio": odd}), "invalid_audio")
        await expect_error(a, json.dumps({"type": "input_audio_buffer.append", "audio": "%%%"}), "invalid_audio")
        huge = base64.b64encode(bytes(300 * 1024)).decode()
        await expect_error(a, json.dumps({"type": "input_audio_buffer.append", "audio": huge}), "event_too_large")
        await expect_error(a, json.dumps({"type": "session.update", "session": {
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}}}), "unsupported_audio_format")
        await expect_error(a, json.dumps({"type": "response.create"}), "no_user_input")
        await expect_error(a, json.dumps({"type": "input_audio_buffer.commit"}), "input_audio_buffer_commit_empty")
        await a.ws.send(b"\x00\x01binary")
        assert (await a.wait_for("error", timeout=10)).error_code == "invalid_event"
        # a still works
        await a.send_text("How much is the yearly Care+ membership?")
        a_result = await a.collect_turn(timeout=90)
        assert a_result.status == "completed" and a_result.reply.strip()
        await b_turn
        b_result = await b.collect_turn(timeout=90)
        assert b_result.status == "completed" and b_result.reply.strip()


@pytest.mark.parametrize("headers,status", [
    ({}, 401),
    ({"Authorization": "Bearer sk-wrong"}, 401),
    ({"Authorization": f"Bearer {TEST_KEY}", "Origin": "http://evil.example"}, 403),
])
async def test_handshake_refusals(ws_url, headers, status):
    with pytest.raises(InvalidStatus) as err:
        async with connect(ws_url, additional_headers=headers):
            pass
    assert err.value.response.status_code == status
    body = json.loads(err.value.response.body)
    assert body["error"]["code"] in ("invalid_api_key", "origin_not_allowed")


async def test_browser_style_auth_and_allowed_origin(ws_url):
    # Browsers cannot set headers on a WebSocket: the key travels as a subprotocol, and the page's
    # Origin must be on the allow-list.
    proto = f"openai-insecure-api-key.{TEST_KEY}"
    async with connect(ws_url, subprotocols=["realtime", proto],
                       additional_headers={"Origin": "http://127.0.0.1:9999"}) as ws:
        ev = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert ev["type"] == "session.created"
        assert ws.subprotocol == "realtime"


async def test_session_limit_per_key(ws_url):
    clients = [RealtimeClient(ws_url, TEST_KEY) for _ in range(4)]
    for c in clients:
        await c.connect()
    try:
        async with connect(ws_url, additional_headers={"Authorization": f"Bearer {TEST_KEY}"}) as ws:
            ev = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert ev["type"] == "error" and ev["error"]["code"] == "session_limit"
    finally:
        for c in clients:
            await c.close()
    # released: a new session is accepted again
    async with RealtimeClient(ws_url, TEST_KEY) as c:
        assert c.session["type"] == "realtime"


async def test_dead_database_gives_an_error_and_the_turn_still_completes(ws_url, stack):
    from sub250.db.pool import create_pool

    pool = stack.store.pool
    if stack.retriever.cache is not None:
        stack.retriever.cache.clear()  # a cached answer would need no database at all
    await pool.close()  # the database connection is gone
    try:
        async with RealtimeClient(ws_url, TEST_KEY) as client:
            await client.update_session(output_modalities=["text"])
            await client.send_text("How much is the yearly Care+ membership?")
            result = await client.collect_turn(timeout=60)
        assert [e.error_code for e in result.errors] == ["retrieval_unavailable"]
        assert result.status == "completed" and result.reply.strip()
    finally:
        stack.pool = stack.store.pool = await create_pool(stack.dsn, size=2)
