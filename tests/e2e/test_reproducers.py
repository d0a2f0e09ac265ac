"""Reproducers of malformed input found by fuzzing, against the shared real server: each gets its documented
answer (docs/PROTOCOL.md), the same session then completes a text turn, and a second session talking at the
same time is not disturbed. The parsing rules themselves are unit-tested (tests/unit/protocol); these are
about the real server answering right and staying healthy."""

import asyncio
import contextlib
import itertools
import json
import time
from collections import Counter

import aiohttp
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from sub250.sdk import RealtimeClient
from sub250.sdk.client import ConnectionLost

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"
AUTH = {"Authorization": f"Bearer {TEST_KEY}"}
QUESTION = "How much is the yearly Care+ membership?"
OTHER = "How many years is the motor guaranteed for?"
#: Never in a message the server writes (it writes its own short text, never an exception's).
LEAKS = ("Traceback", "Error:", "Exception", "object has no attribute", "line 1 column", "(char ", "Expecting ",
         "codec", "decode")
_markers = itertools.count()


# --- helpers ----------------------------------------------------------------------------------------

async def open_client(ws_url: str, key: str = TEST_KEY) -> RealtimeClient:
    """A text-mode session. Retried while the previous test's sessions are still being released (the test
    key allows 4)."""
    client = RealtimeClient(ws_url, key)
    for attempt in range(10):
        try:
            await client.connect()
            break
        except ConnectionLost:  # session_limit, then close 1008
            await client.close()
            if attempt == 9:
                raise
            await asyncio.sleep(0.2)
    await client.update_session(output_modalities=["text"], max_output_tokens=48)
    return client


@contextlib.asynccontextmanager
async def two_sessions(ws_url: str):
    a = await open_client(ws_url)
    try:
        b = await open_client(ws_url)
        try:
            yield a, b
        finally:
            await b.close()
    finally:
        await a.close()


async def turn(client: RealtimeClient, question: str = QUESTION, *, create: dict | None = None):
    """A text turn that must complete with a reply and no error."""
    await client.send_text(question, respond=create is None)
    if create is not None:
        await client.send(create)
    return await finish_turn(client)


async def finish_turn(client: RealtimeClient, timeout: float = 180):
    result = await client.collect_turn(timeout=timeout)
    assert result.status == "completed" and result.reply.strip(), (result.status, result.reply, result.errors)
    assert not result.errors, [e.data for e in result.errors]
    return result


async def with_bystander(b: RealtimeClient, abuse) -> None:
    """Run ``abuse()`` while ``b`` has a turn of its own in flight; b's turn must complete normally."""
    other = asyncio.ensure_future(turn(b, OTHER))
    try:
        await abuse()
    except BaseException:
        other.cancel()
        await asyncio.gather(other, return_exceptions=True)
        raise
    await other


async def answers(client: RealtimeClient, *frames: str | bytes, timeout: float = 20.0) -> list:
    """Send ``frames``, then a ``response.cancel`` marker; return the events that came before the marker's
    answer, which must be ``response_not_found`` (so no response is running, none was started)."""
    marker = f"marker_{next(_markers)}"
    for frame in frames:
        await client.ws.send(frame)
    await client.send({"type": "response.cancel", "event_id": marker})
    got = []
    deadline = time.monotonic() + timeout
    while True:
        ev = await client.next_event(timeout=max(0.0, deadline - time.monotonic()))
        if ev.is_error and ev.data["error"].get("event_id") == marker:
            assert ev.error_code == "response_not_found", ev.data
            return got
        got.append(ev)


def only_error(events: list, code: str, *, event_id: str | None = None, param: str | None = None) -> dict:
    """``events`` is exactly one ``error`` with ``code`` (no ``response.created``, nothing else), in the
    server's own words."""
    assert [e.type for e in events] == ["error"], [e.data for e in events]
    err = events[0].data["error"]
    assert err["code"] == code, err
    if event_id is not None:
        assert err["event_id"] == event_id, err
    if param is not None:
        assert (err["param"] or "").startswith(param), err
    check_message(err["message"])
    return err


def check_message(message: str) -> None:
    assert message and len(message) <= 300, message
    assert not any(leak in message for leak in LEAKS), message


# --- (1)-(4): bounds while parsing ------------------------------------------------------------------

async def test_deep_nesting_is_refused_and_the_sessions_go_on(ws_url):
    deep_array = "[" * 990 + "]" * 990
    deep_object = '{"a":' * 990 + "1" + "}" * 990
    async with two_sessions(ws_url) as (a, b):
        async def abuse():
            for raw in (deep_array, deep_object,
                        '{"type": "session.update", "event_id": "e1", "session": {"instructions": ' + deep_array + "}}",
                        '{"type": "session.update", "event_id": "e2", "session": ' + deep_object + "}",
                        '{"type": "response.create", "event_id": "e3", "response": {"input": ' + deep_array + "}}"):
                t0 = time.monotonic()
                only_error(await answers(a, raw), "invalid_json")
                assert time.monotonic() - t0 < 10  # a linear pre-scan, not a recursive parse
        await with_bystander(b, abuse)
        await turn(a)


async def test_a_5000_digit_integer_is_refused_without_quoting_it(ws_url):
    digits = "9" * 5000
    async with two_sessions(ws_url) as (a, b):
        async def abuse():
            for raw in ('{"type": "response.cancel", "event_id": ' + digits + "}",
                        '{"type": "response.cancel", "event_id": -' + digits + "}",
                        '{"type": "conversation.item.truncate", "event_id": "e1", "item_id": "x", "content_index": 0, '
                        '"audio_end_ms": ' + digits + "}"):
                err = only_error(await answers(a, raw), "invalid_value")
                assert "9" * 20 not in err["message"], err
        await with_bystander(b, abuse)
        await turn(a)


async def test_audio_input_and_output_of_the_wrong_type_are_invalid_values(ws_url):
    async with two_sessions(ws_url) as (a, b):
        async def abuse():
            for side in ("input", "output"):
                for value in ("pcm16", [1, 2], 7):
                    eid = f"e_{side}_{len(json.dumps(value))}"
                    raw = json.dumps({"type": "session.update", "event_id": eid, "session": {"audio": {side: value}}})
                    only_error(await answers(a, raw), "invalid_value", event_id=eid, param=f"session.audio.{side}")
            # nothing of it was applied: the session is as it was, and still takes a valid update
            updated = await a.update_session(output_modalities=["text"], max_output_tokens=48)
            audio = updated.data["session"]["audio"]
            assert audio["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
            assert audio["output"]["format"] == {"type": "audio/pcm", "rate": 24000}
        await with_bystander(b, abuse)
        await turn(a)


async def test_truncating_an_assistant_item_at_10_to_the_400_ms_is_an_invalid_value(ws_url):
    async with two_sessions(ws_url) as (a, b):
        first = await turn(a)
        item_id = next(e.data["item"]["id"] for e in first.events if e.type == "response.output_item.added")

        async def abuse():
            raw = ('{"type": "conversation.item.truncate", "event_id": "e_trunc", "item_id": "%s", "content_index": 0, '
                   '"audio_end_ms": %s}' % (item_id, 10**400))
            only_error(await answers(a, raw), "invalid_value")
            # the item is there and a sane truncate of it works
            got = await answers(a, json.dumps({"type": "conversation.item.truncate", "item_id": item_id,
                                               "content_index": 0, "audio_end_ms": 60_000}))
            assert [e.type for e in got] == ["conversation.item.truncated"], [e.data for e in got]
        await with_bystander(b, abuse)
        await turn(a)


# --- (5)-(7): response.create options, no wedge -------------------------------------------------------

async def test_max_output_tokens_inf_answers_and_bad_options_do_not_wedge_the_session(ws_url):
    async with two_sessions(ws_url) as (a, b):
        async def abuse():
            # "inf" is valid GA: a normal, completed response
            await turn(a, create={"type": "response.create", "response": {"max_output_tokens": "inf"}})
            for eid, options, param in (("e_abc", {"max_output_tokens": "abc"}, "response.max_output_tokens"),
                                        ("e_list", {"max_output_tokens": [1]}, "response.max_output_tokens"),
                                        ("e_mod", {"output_modalities": 5}, "response.output_modalities")):
                raw = json.dumps({"type": "response.create", "event_id": eid, "response": options})
                only_error(await answers(a, raw), "invalid_value", event_id=eid, param=param)
                # the next response.create is answered (no conversation_already_has_active_response)
                await a.send({"type": "response.create"})
                await finish_turn(a)
            only_error(await answers(a, '{"type": "response.cancel", "event_id": "e_cancel"}'), "response_not_found",
                       event_id="e_cancel")
        await with_bystander(b, abuse)


async def test_create_then_cancel_in_one_burst_gives_exactly_one_response_done(ws_url):
    async with two_sessions(ws_url) as (a, b):
        async def abuse():
            item = {"type": "conversation.item.create", "item": {
                "type": "message", "role": "user", "content": [{"type": "input_text", "text": QUESTION}]}}
            # all three written at once, without waiting for any answer
            await asyncio.gather(a.ws.send(json.dumps(item)), a.ws.send('{"type": "response.create"}'),
                                 a.ws.send('{"type": "response.cancel"}'))
            result = await a.collect_turn(timeout=60)
            rest = await answers(a)  # nothing runs any more, and nothing more came
            events = result.events + rest
            types = [e.type for e in events]
            assert types.count("response.created") == 1 and types.count("response.done") == 1, types
            assert result.status in ("cancelled", "completed"), result.status
            assert not [e for e in events if e.is_error], [e.data for e in events if e.is_error]
            # and the next response.create works
            await a.send({"type": "response.create"})
            await finish_turn(a)
        await with_bystander(b, abuse)
        await turn(a)


async def test_out_of_range_options_start_no_response(ws_url):
    async with two_sessions(ws_url) as (a, b):
        async def abuse():
            await a.send_text(QUESTION, respond=False)  # a user message is there to answer
            cases = [('"max_output_tokens": -1', "response.max_output_tokens"),
                     ('"max_output_tokens": 1e9', "response.max_output_tokens"),
                     ('"max_output_tokens": 1000000000', "response.max_output_tokens"),
                     ('"output_modalities": ["video"]', "response.output_modalities"),
                     ('"output_modalities": "text"', "response.output_modalities"),
                     ('"instructions": 5', "response.instructions"),
                     ('"instructions": {}', "response.instructions")]
            got = await answers(a)  # the user item's own events
            assert [e.type for e in got] == ["conversation.item.added", "conversation.item.done"], got
            for i, (option, param) in enumerate(cases):
                raw = '{"type": "response.create", "event_id": "e%d", "response": {%s}}' % (i, option)
                only_error(await answers(a, raw), "invalid_value", event_id=f"e{i}", param=param)
            # 200 KB of item text: under the server's max_event_bytes (256 KiB), over the 32 KiB item-text limit
            big = json.dumps({"type": "conversation.item.create", "event_id": "e_big", "item": {
                "type": "message", "role": "user", "content": [{"type": "input_text", "text": "x" * 200_000}]}})
            only_error(await answers(a, big), "invalid_value", event_id="e_big", param="item.content[0].text")
            # the user message is still the one to answer
            await a.send({"type": "response.create"})
            await finish_turn(a)
        await with_bystander(b, abuse)
        await turn(a)


# --- (9): binary frames against the message rate ---------------------------------------------------------

async def test_a_flood_of_binary_frames_is_rate_limited_and_the_session_recovers(ws_url):
    async with two_sessions(ws_url) as (a, b):
        await b.send_text(OTHER)  # b's turn is under way before the flood (b shares the key's rate)
        await b.wait_for("response.created", timeout=30)
        for _ in range(1400):
            await a.ws.send(b"\x00\x01binary")
        codes = [(await a.wait_for("error", timeout=30)).error_code for _ in range(1400)]
        assert set(codes) <= {"invalid_event", "rate_limit_exceeded"}, set(codes)
        assert codes.count("rate_limit_exceeded") > 0 and codes.count("invalid_event") > 0, Counter(codes)
        await finish_turn(b)
        await asyncio.sleep(2.5)  # the key's bucket refills (a burst of 1000 at 500 messages/s)
        await turn(a)


# --- (10)-(12): the HTTP front door ----------------------------------------------------------------------

async def test_dns_rebinding_is_refused_on_the_real_server(ws_url, server):
    port = server.port
    evil = f"evil.example:{port}"
    async with two_sessions(ws_url) as (a, b):
        async def abuse():
            with pytest.raises(InvalidStatus) as err:
                async with connect(f"ws://{evil}/v1/realtime", host="127.0.0.1", port=port,  # Host: evil.example:PORT
                                   additional_headers={**AUTH, "Origin": f"http://{evil}"}):
                    pass
            assert err.value.response.status_code == 403
            assert json.loads(err.value.response.body)["error"]["code"] == "host_not_allowed"
            async with aiohttp.ClientSession() as http:
                async with http.post(f"http://127.0.0.1:{port}/v1/realtime/client_secrets",
                                     headers={**AUTH, "Host": evil, "Origin": f"http://{evil}"}) as resp:
                    assert resp.status == 403
                    assert (await resp.json())["error"]["code"] == "host_not_allowed"
                    assert "Access-Control-Allow-Origin" not in resp.headers, dict(resp.headers)
        await with_bystander(b, abuse)
        await turn(a)


async def test_a_client_secret_cannot_mint_a_client_secret(ws_url, server):
    base = f"http://127.0.0.1:{server.port}/v1/realtime/client_secrets"
    async with two_sessions(ws_url) as (a, b):
        async def abuse():
            async with aiohttp.ClientSession() as http:
                async with http.post(base, headers=AUTH, json={"expires_after": {"seconds": 60}}) as resp:
                    assert resp.status == 200
                    secret = (await resp.json())["value"]
                assert secret.startswith("ek_")
                async with http.post(base, headers={"Authorization": f"Bearer {secret}"}) as resp:
                    assert resp.status == 403
                    body = await resp.json()
                    assert body["error"]["code"] == "client_secret_not_allowed"
                    check_message(body["error"]["message"])
            # the secret itself is good: it opens a session for the key
            c = await open_client(ws_url, secret)
            await c.close()
        await with_bystander(b, abuse)
        await turn(a)


async def test_an_sdp_offer_that_is_not_utf8_gets_a_generic_invalid_sdp(ws_url, server):
    async with two_sessions(ws_url) as (a, b):
        async def abuse():
            async with aiohttp.ClientSession() as http:
                async with http.post(f"http://127.0.0.1:{server.port}/v1/realtime/calls",
                                     data=b"v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\nm=audio 9 \xff\xfe\xfd\r\n",
                                     headers={**AUTH, "Content-Type": "application/sdp"}) as resp:
                    assert resp.status == 400
                    body = await resp.json()
            assert body["error"]["code"] == "invalid_sdp"
            check_message(body["error"]["message"])
            assert "byte" not in body["error"]["message"] and "position" not in body["error"]["message"]
        await with_bystander(b, abuse)
        await turn(a)


@pytest.mark.parametrize("body", [
    b'{"expires_after": {"seconds": 60}',                        # not JSON (no closing brace)
    b'{"expires_after": {"seconds": ' + b"9" * 5000 + b"}}",     # an integer Python will not convert
], ids=["truncated-json", "5000-digit-seconds"])
async def test_a_bad_client_secrets_body_is_a_400_in_the_servers_own_words(server, body):
    async with aiohttp.ClientSession() as http:
        async with http.post(f"http://127.0.0.1:{server.port}/v1/realtime/client_secrets", data=body,
                             headers={**AUTH, "Content-Type": "application/json"}) as resp:
            status, answer = resp.status, await resp.json()
    assert status == 400 and answer["error"]["code"] == "invalid_body", (status, answer)
    check_message(answer["error"]["message"])
