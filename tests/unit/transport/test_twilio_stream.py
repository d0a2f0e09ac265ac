"""The Twilio stream as the session's transport (app/telephony/twilio_call.py), on a real server and real sockets
with a stand-in session: nothing opens before a valid ``start``; caller μ-law reaches the session as PCM16 at
8 kHz; reply audio leaves as 20 ms ``media`` frames, a ``mark`` after each chunk, paced to stay just ahead of
Twilio's playback; barge-in sends ``clear``; a paused reply sends nothing more; keys become an entry; ``stop``
ends the call. Twilio's side is scripts/bench/phone.py."""

from __future__ import annotations

import asyncio
import logging
import time

import numpy as np
import pytest_asyncio

from scripts.bench import phone
from sub250.gateway import ApiKeys, GatewayLimits
from sub250.server import Server
from sub250.telephony import keypad, phone_call, twilio_call
from sub250.telephony.twilio_routes import TwilioSettings
from tests.unit.transport.conftest import TEST_KEY

TOKEN = "unit-auth-token"


@pytest_asyncio.fixture
async def phone_server(sessions):
    srv = Server("127.0.0.1", 0, keys=ApiKeys([TEST_KEY]), limits=GatewayLimits(max_sessions_per_key=2),
                 twilio=TwilioSettings(TOKEN))
    await srv.listen()
    srv.attach(object())
    yield srv
    await srv.close()


async def call_of(srv: Server, call_sid: str = "CA1") -> phone.MediaStream:
    status, body = await phone.webhook(f"http://127.0.0.1:{srv.port}/v1/telephony/twilio/voice", TOKEN,
                                       call_sid=call_sid)
    assert status == 200, body
    twiml = phone.parse_twiml(body)
    return phone.MediaStream(twiml.stream_url, call_sid, twiml.parameters)


async def until(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def the_call(srv: Server) -> twilio_call.TwilioCall:
    (call,) = srv.calls.values()
    return call


async def test_caller_audio_reaches_the_session_as_pcm16_at_8_khz(phone_server, sessions):
    mu = phone.mu_law(np.sin(np.arange(1600) / 5).astype(np.float32) * 0.5, 8000)
    async with await call_of(phone_server) as call:
        await call.say(mu, realtime=False)
        await until(lambda: sessions and sum(len(a[0]) for a in sessions[0].audio) == 2 * len(mu))
    session = sessions[0]
    assert session.configured == [{"type": "realtime", **twilio_call.PHONE_SESSION, "include": ["sub250.latency"]}]
    assert session.started
    assert {rate for _, rate, _ in session.audio} == {8000}
    assert b"".join(a[0] for a in session.audio) == (phone.pcm_of(mu) * 32768).astype("<i2").tobytes()
    await until(lambda: session.closed and not phone_server.calls)


async def test_reply_audio_leaves_paced_in_frames_with_a_mark_after_each_chunk(phone_server, sessions):
    chunk = bytes(range(256)) * 15 + bytes(160)  # 0.5 s of μ-law
    async with await call_of(phone_server) as call:
        await until(lambda: phone_server.calls)
        tw = the_call(phone_server)
        for _ in range(4):
            tw.send_audio(chunk, response_id="resp_1", item_id="item_1")
        tw.audio_done("resp_1")
        await until(lambda: len(call.heard.marks) == 4 and not tw.playing, 10)
    sizes = {len(m) for _, m in call.heard.media}
    assert sizes == {160} and call.heard.audio() == chunk * 4
    assert [m.split(".")[0] for m in call.heard.marks] == ["resp_1"] * 4
    times = [t for t, _ in call.heard.media]
    # 2 s of audio sent no more than LEAD_MS ahead of its playing: the last chunk went out ~1.3 s after the first
    assert times[-1] - times[0] > 1.0, times[-1] - times[0]


async def test_barge_in_clears_what_twilio_holds_and_a_paused_reply_waits(phone_server, sessions):
    chunk = bytes(4000)  # 0.5 s
    async with await call_of(phone_server) as call:
        await until(lambda: phone_server.calls)
        tw = the_call(phone_server)
        tw.purge("resp_never_sent")
        tw.send_audio(chunk, response_id="resp_1", item_id="item_1")
        tw.send_audio(chunk, response_id="resp_1", item_id="item_1")
        tw.send_audio(chunk, response_id="resp_1", item_id="item_1")
        await until(lambda: call.heard.media)
        tw.pause_audio("resp_1", True)
        await asyncio.sleep(1.2)
        sent_paused = len(call.heard.audio())
        assert sent_paused < 3 * len(chunk), "the paused reply's last chunk waited"
        tw.pause_audio("resp_1", False)
        await until(lambda: len(call.heard.audio()) == 3 * len(chunk))
        tw.send_audio(chunk, response_id="resp_2", item_id="item_2")
        tw.send_audio(chunk, response_id="resp_2", item_id="item_2")
        await until(lambda: len(call.heard.audio()) > 3 * len(chunk))
        assert tw.purge("resp_2") in (0, 1)
        await until(lambda: call.heard.clears)
        assert len(call.heard.clears) == 1, "one clear: the reply never sent cleared nothing"
        await until(lambda: not tw.playing)  # the marks in the cleared buffer came back


async def test_keys_become_an_entry_and_each_a_dtmf_event(phone_server, sessions, monkeypatch):
    monkeypatch.setattr(keypad, "ENTRY_IDLE_S", 0.2)  # read at each key (phone_call.PhoneCall.pressed)
    async with await call_of(phone_server) as call:
        for key in "12#9":
            await call.dtmf(key)
        await until(lambda: sessions and len(sessions[0].events) == 4, 5)  # "12" at '#', "9" once the keys stop
    session = sessions[0]
    assert session.digits == list("12#9")
    kinds = [(e.type, e.data.get("item", {}).get("content", [{}])[0].get("text")) for e, _ in session.events]
    assert kinds == [("conversation.item.create", "Keyed in: 12"), ("response.create", None),
                     ("conversation.item.create", "Keyed in: 9"), ("response.create", None)]


async def test_stop_ends_the_call_and_frees_its_slot(phone_server, sessions):
    for sid in ("CA1", "CA2", "CA3"):  # two at once is this server's limit: each stop frees one
        async with await call_of(phone_server, sid) as call:
            await until(lambda: phone_server.calls)
            await call.stop()
            assert await call.closed(5) is not None
        await until(lambda: not phone_server.calls)
    assert len(sessions) == 3 and all(s.closed for s in sessions)


async def test_a_start_without_a_valid_token_opens_no_session(phone_server, sessions):
    url = f"ws://127.0.0.1:{phone_server.port}/v1/telephony/twilio/stream"
    async with phone.MediaStream(url, "CA1", {"sub250_token": "1.x"}) as call:
        assert await call.closed(5) == 1008
    assert not sessions and not phone_server.calls


async def test_events_have_no_reader_but_each_turns_ledger_is_kept(phone_server, sessions, caplog):
    caplog.set_level(logging.INFO, logger="sub250.telephony")
    async with await call_of(phone_server) as call:
        await until(lambda: phone_server.calls)
        tw = the_call(phone_server)
        sent = []
        tw.send({"type": "response.done"}, on_sent=sent.append)
        tw.send({"type": "sub250.turn.latency", "final": False, "beside": {"voice_to_voice": 1.0}})
        for n in range(phone_call.KEPT_TURNS + 2):
            tw.send({"type": "sub250.turn.latency", "final": True, "turn_id": f"t{n}", "outcome": "completed",
                     "beside": {"voice_to_voice": 400.0 + n}, "spans": {"ttft": 3.0}})
        tw.send({"type": "error", "error": {"code": "invalid_value", "message": "the session said so"}})
        await until(lambda: sent)
        assert [t["turn_id"] for t in tw.turns] == [f"t{n}" for n in range(2, phone_call.KEPT_TURNS + 2)]
        assert "voice_to_voice 433.0 ms" in caplog.text and "invalid_value: the session said so" in caplog.text
        assert not call.heard.other, "nothing but Twilio's messages goes to Twilio"


async def test_speech_started_clears_a_finished_reply_still_playing(phone_server, sessions):
    """The session is done with a reply whose audio Twilio still has to play: when the caller's speech is sure
    (speech_started), that audio goes, here and in Twilio's buffer - the next reply does not wait behind it."""
    async with await call_of(phone_server) as call:
        await until(lambda: phone_server.calls)
        tw = the_call(phone_server)
        for _ in range(6):
            tw.send_audio(bytes(4000), response_id="resp_1", item_id="item_1")  # 3 s, sent 200 ms ahead
        tw.audio_done("resp_1")
        await until(lambda: call.heard.media)
        tw.send({"type": "input_audio_buffer.speech_started", "audio_start_ms": 1000, "item_id": "item_2"})
        await until(lambda: call.heard.clears)
        await asyncio.sleep(0.1)
        assert len(call.heard.clears) == 1, "one clear for all it dropped"
        assert not tw.playing, "nothing of resp_1 is left to send or to hear"
        sent_before = len(call.heard.audio())
        tw.send_audio(bytes(800), response_id="resp_2", item_id="item_2")
        await until(lambda: len(call.heard.audio()) == sent_before + 800, 1.0)  # at once, not after resp_1
        tw.send({"type": "input_audio_buffer.speech_started", "audio_start_ms": 2000, "item_id": "item_3"})
