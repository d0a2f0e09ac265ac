"""Twilio Media Streams end to end (app/telephony): the signed webhook answers TwiML, and a stream driven the way
Twilio's documentation says Twilio drives it (scripts/bench/phone.py) is a normal session on the real engines - a
spoken question heard at 8 kHz μ-law and answered in μ-law with marks, barge-in answered with ``clear``, keys
pressed reaching the conversation, a hang-up mid-reply freeing the call at once. A wrong signature gets 403, a
stream without its token is closed before anything opens."""

from __future__ import annotations

import asyncio
import json
import re
import time

import numpy as np
import pytest
import pytest_asyncio
import soxr
from prometheus_client import REGISTRY

from scripts.bench import phone
from tests.e2e.helpers import server_over, until

pytestmark = pytest.mark.engines
AUTH_TOKEN = "twilio-test-auth-token-0123456789abcdef"
QUESTION = "My purifier stopped and the screen says E7, what does that mean?"  # tests/data/kb_questions.json
FACT = "knocked over"


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def phone_server(server):
    """A server over the test server's engines with Twilio on (the test server has it off)."""
    from sub250.telephony.twilio_routes import TwilioSettings

    async with server_over(server.stack, twilio=TwilioSettings(AUTH_TOKEN)) as srv:
        yield srv


@pytest.fixture(scope="module")
def voice_url(phone_server) -> str:
    return f"http://127.0.0.1:{phone_server.port}/v1/telephony/twilio/voice"


@pytest.fixture(scope="module")
def question_mu(speak) -> bytes:
    return phone.mu_law(speak(QUESTION))


async def answered(voice_url: str, call_sid: str) -> phone.Twiml:
    status, body = await phone.webhook(voice_url, AUTH_TOKEN, call_sid=call_sid)
    assert status == 200, body
    return phone.parse_twiml(body)


def twilio_calls(server) -> list:
    return [c for c in server.calls.values() if c.id.startswith("tw")]


async def test_the_webhook_answers_twiml_that_streams_to_us(phone_server, voice_url):
    twiml = await answered(voice_url, "CA" + "a" * 32)
    assert twiml.stream_url == f"ws://127.0.0.1:{phone_server.port}/v1/telephony/twilio/stream"
    assert set(twiml.parameters) == {"sub250_token"} and twiml.parameters["sub250_token"]


async def test_an_unsigned_or_wrongly_signed_webhook_gets_403(voice_url):
    for signature, why in ((None, "missing"), ("bm90IGEgc2lnbmF0dXJl", "wrong")):
        status, body = await phone.webhook(voice_url, None, signature=signature)
        assert status == 403, body
        assert json.loads(body)["error"]["code"] == "invalid_twilio_signature" and why in body
    # signed with another account's token
    status, _ = await phone.webhook(voice_url, "another-accounts-token")
    assert status == 403


async def test_telephony_is_off_without_an_auth_token(server):
    status, body = await phone.webhook(f"http://127.0.0.1:{server.port}/v1/telephony/twilio/voice", AUTH_TOKEN)
    assert status == 404 and json.loads(body)["error"]["code"] == "telephony_off"


async def test_a_stream_without_its_calls_token_opens_nothing(phone_server, voice_url):
    twiml = await answered(voice_url, "CA" + "b" * 32)
    before = REGISTRY.get_sample_value("sub250_telephony_refused_total", {"reason": "stream"}) or 0.0
    cases = ({}, {"sub250_token": "123.abc"},  # none, made up
             twiml.parameters)  # minted for call b, presented by call c
    for parameters in cases:
        async with phone.MediaStream(twiml.stream_url, "CA" + "c" * 32, parameters) as call:
            assert await call.closed(timeout=10) == 1008
            assert not call.heard.media
    assert not twilio_calls(phone_server)
    assert REGISTRY.get_sample_value("sub250_telephony_refused_total", {"reason": "stream"}) == before + 3


async def test_a_phone_question_is_answered_in_mu_law_with_marks(phone_server, voice_url, question_mu, stack):
    call_sid = "CA" + "d" * 32
    twiml = await answered(voice_url, call_sid)
    async with phone.MediaStream(twiml.stream_url, call_sid, twiml.parameters) as call:
        await call.raw("{not json")  # a bad frame is dropped; the call goes on
        await call.raw(json.dumps({"event": "media", "streamSid": call.stream_sid, "media": {"payload": "@@"}}))
        await call.silence(0.3)
        spoken = await call.say(question_mu)
        await call.silence(1.0)
        await until(lambda: call.heard.media, 60, "the reply's first audio")
        # the line stays open, quiet, while the reply plays and its marks come back
        quiet = asyncio.ensure_future(call.silence(20))
        await until(lambda: call.heard.marks and not twilio_calls(phone_server)[0].playing, 60,
                    "the reply played to its last mark")
        quiet.cancel()
        tw = twilio_calls(phone_server)[0]
        said = [m["content"] for m in tw.session.conversation.for_prompt() if m["role"] == "assistant"]
        (ledger,) = tw.turns  # the turn's latency report, as a WebSocket client would get it
    first = call.heard.first_media()
    v2v = ledger["beside"]["voice_to_voice"]
    print(f"phone: voice_to_voice {v2v} ms (server ledger); file end -> first reply media {(first - spoken) * 1000:.0f} ms")
    assert ledger["outcome"] == "completed" and 0 < v2v < (first - spoken) * 1000 + 1000, ledger
    assert said and FACT in said[-1].lower(), said
    assert not call.heard.clears, "nothing to clear: the caller did not speak over the reply"
    reply = phone.pcm_of(call.heard.audio())
    assert reply.size > 0.5 * phone.RATE and np.sqrt(np.mean(reply ** 2)) > 0.02  # speech, not silence
    heard_back = stack.asr.transcribe(soxr.resample(reply, 8000, 16000).astype(np.float32)).text
    expected = set(words(said[-1]))
    assert len(expected & set(words(heard_back))) >= len(expected) / 2, (said, heard_back)
    await until(lambda: not twilio_calls(phone_server), 10, "the call closed after the stream did")


async def test_speaking_over_the_reply_clears_twilios_buffer(phone_server, voice_url, question_mu, speak):
    call_sid = "CA" + "e" * 32
    twiml = await answered(voice_url, call_sid)
    over = phone.mu_law(speak("Sorry, one more thing, how long is the warranty on the motor?"))
    async with phone.MediaStream(twiml.stream_url, call_sid, twiml.parameters) as call:
        await call.silence(0.3)
        await call.say(question_mu)
        await call.silence(0.5)
        quiet = asyncio.ensure_future(call.silence(30))
        await until(lambda: call.heard.media, 60, "the reply's first audio")
        quiet.cancel()
        await call.silence(0.3)
        barged = time.monotonic()
        await call.say(over)
        quiet = asyncio.ensure_future(call.silence(20))
        await until(lambda: [t for t in call.heard.clears if t > barged], 15, "clear after the caller spoke over")
        quiet.cancel()


async def test_keys_pressed_reach_the_conversation(phone_server, voice_url):
    call_sid = "CA" + "f" * 32
    twiml = await answered(voice_url, call_sid)
    async with phone.MediaStream(twiml.stream_url, call_sid, twiml.parameters) as call:
        await call.silence(0.3)
        for digit in "4821*48213#":  # '*' starts the entry again
            await call.dtmf(digit)
        quiet = asyncio.ensure_future(call.silence(30))
        await until(lambda: call.heard.media, 60, "a reply to the keyed-in entry")
        quiet.cancel()
        session = twilio_calls(phone_server)[0].session
        said = [m["content"] for m in session.conversation.for_prompt() if m["role"] == "user"]
    assert said == ["Keyed in: 48213"], said


async def test_a_hang_up_mid_reply_frees_the_call_at_once(phone_server, voice_url, question_mu):
    call_sid = "CA" + "9" * 32
    twiml = await answered(voice_url, call_sid)
    async with phone.MediaStream(twiml.stream_url, call_sid, twiml.parameters) as call:
        await call.silence(0.3)
        await call.say(question_mu)
        quiet = asyncio.ensure_future(call.silence(30))
        await until(lambda: call.heard.media, 60, "the reply's first audio")
        quiet.cancel()
        assert twilio_calls(phone_server)[0].playing, "hung up mid-reply"
        await call.stop()
        hung_up = time.monotonic()
        await until(lambda: not twilio_calls(phone_server), 2, "the call freed after stop")
    print(f"call freed {1000 * (time.monotonic() - hung_up):.0f} ms after stop")
    assert REGISTRY.get_sample_value("sub250_sessions_open", {"transport": "twilio"}) == 0
