"""SIP calls (app/telephony/sip_*.py) on the real stack - PJSIP answering, Debian's baresip calling over UDP with
G.711 and RFC 4733 keys - with a stand-in session: the caller's audio reaches the session as PCM16 at 8 kHz, the
reply's audio reaches the caller, keys reach the session, BYE ends the call and frees its slot, and an address
outside the allow-list is refused 403 before anything opens."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import numpy as np
import pytest
import pytest_asyncio

from scripts.bench import softphone
from sub250.audio.rates import OUTPUT_RATE
from sub250.gateway import ApiKeys, GatewayLimits
from sub250.server import Server
from sub250.telephony.sip_agent import RESTART_DELAY_S, SipSettings
from tests.unit.transport.conftest import TEST_KEY


@pytest.fixture(autouse=True)
def _baresip():
    if (why := softphone.available()) is not None:
        pytest.fail(f"{why}: make test installs it (scripts/install-phone-tools.sh)")


async def sip_server(allow: tuple[str, ...] = ("127.0.0.1",)) -> Server:
    srv = Server("127.0.0.1", 0, keys=ApiKeys([TEST_KEY]), limits=GatewayLimits(max_sessions_per_key=2),
                 sip=SipSettings(host="127.0.0.1", port=0, allow=allow))
    await srv.listen()
    srv.attach(object())
    return srv


@pytest_asyncio.fixture
async def server(sessions):
    srv = await sip_server()
    yield srv
    await srv.close()


def tone(seconds: float, rate: int, hz: float = 440.0) -> np.ndarray:
    return (0.4 * np.sin(2 * np.pi * hz * np.arange(int(seconds * rate)) / rate)).astype(np.float32)


async def until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_softphone_call_is_a_session_both_ways(server, sessions, tmp_path):
    wav = softphone.caller_wav(tmp_path / "caller.wav", tone(1.0, 8000), 8000, tail_s=20)
    async with softphone.Softphone(tmp_path, wav) as phone:
        await phone.dial(f"sip:sub250@127.0.0.1:{server.sip.port}")
        await phone.wait_for("CALL_ESTABLISHED", 10)
        await until(lambda: sessions and sum(len(a[0]) for a in sessions[0].audio) > 2 * 8000 * 1.2)
        session = sessions[0]
        assert {rate for _, rate, _ in session.audio} == {8000}
        heard = np.frombuffer(b"".join(a[0] for a in session.audio), "<i2").astype(np.float32) / 32768
        assert np.abs(heard).max() > 0.2, "the caller's tone, not silence"
        (call,) = server.calls.values()
        sent = []
        pcm = (tone(1.0, OUTPUT_RATE, 660.0) * 32767).astype("<i2").tobytes()
        call.send_audio(pcm, response_id="resp_1", item_id="item_1", on_sent=sent.append)
        call.audio_done("resp_1")
        await until(lambda: sent and not call.playing, 5)
        await phone.keys("42#")
        await until(lambda: len(session.digits) == 3, 5)
        assert session.digits == list("42#")
        await phone.hangup()
        await until(lambda: not server.calls, 5)
    assert session.closed
    back = phone.heard()
    spectrum = np.abs(np.fft.rfft(back))
    assert np.argmax(spectrum[1:]) + 1 == pytest.approx(660 * back.size / 8000, rel=0.02), "the reply's tone"


async def test_an_address_outside_the_allow_list_is_refused(sessions, tmp_path):
    srv = await sip_server(allow=("10.0.0.0/8",))
    try:
        wav = softphone.caller_wav(tmp_path / "caller.wav", tone(0.5, 8000), 8000, tail_s=5)
        async with softphone.Softphone(tmp_path, wav) as phone:
            await phone.dial(f"sip:sub250@127.0.0.1:{srv.sip.port}")
            closed = await phone.wait_for("CALL_CLOSED", 10)
        assert "403" in str(closed), closed
        assert not sessions and not srv.calls
    finally:
        await srv.close()


async def test_a_worker_that_dies_ends_its_calls_and_a_new_one_answers(server, sessions, tmp_path):
    """PJSIP runs in a process of its own: killed mid-call, its call ends, the server lives on, and a new worker
    answers the next call on the same port."""
    port, first = server.sip.port, server.sip.agent.pid
    wav = softphone.caller_wav(tmp_path / "caller.wav", tone(1.0, 8000), 8000, tail_s=20)
    async with softphone.Softphone(tmp_path / "one", wav) as phone:
        await phone.dial(f"sip:sub250@127.0.0.1:{port}")
        await phone.wait_for("CALL_ESTABLISHED", 10)
        await until(lambda: len(server.calls) == 1, 5)
        os.kill(first, signal.SIGKILL)
        await until(lambda: not server.calls, 5)
        assert sessions[0].closed
        assert not server.sip.agent.listening
        await until(lambda: server.sip.agent.listening, RESTART_DELAY_S + 10)
    assert server.sip.agent.pid != first
    assert server.sip.port == port and server.sip.agent.restarts == 1
    async with softphone.Softphone(tmp_path / "two", wav) as phone:
        await phone.dial(f"sip:sub250@127.0.0.1:{port}")
        await phone.wait_for("CALL_ESTABLISHED", 10)
        await until(lambda: len(sessions) == 2 and sessions[1].audio, 5)
        await phone.hangup()
        await until(lambda: not server.calls, 5)


async def test_speech_started_clears_a_reply_still_playing(server, sessions, tmp_path):
    """A finished reply still queued in the worker goes when the caller speaks again (else the next reply waits
    behind it: journal §47, jfk.wav heard 9.2 s late)."""
    wav = softphone.caller_wav(tmp_path / "caller.wav", tone(0.5, 8000), 8000, tail_s=20)
    async with softphone.Softphone(tmp_path, wav) as phone:
        await phone.dial(f"sip:sub250@127.0.0.1:{server.sip.port}")
        await phone.wait_for("CALL_ESTABLISHED", 10)
        await until(lambda: len(server.calls) == 1, 5)
        (call,) = server.calls.values()
        sent = []
        pcm = (tone(10.0, OUTPUT_RATE, 660.0) * 32767).astype("<i2").tobytes()
        call.send_audio(pcm, response_id="resp_1", item_id="item_1", on_sent=sent.append)
        call.audio_done("resp_1")
        await until(lambda: sent, 5)
        assert call.playing
        call.send({"type": "input_audio_buffer.speech_started"})
        await until(lambda: not call.playing, 2)  # 10 s of reply, gone at once
        await phone.hangup()
        await until(lambda: not server.calls, 5)


async def test_a_refer_puts_the_caller_through_to_a_person_and_ends_the_call(server, sessions, tmp_path):
    """``POST …/refer``: a REFER to the caller's phone, which calls the target; once that call is up the server's
    leg hangs up (BYE) and the call's session ends."""
    import aiohttp

    wav = softphone.caller_wav(tmp_path / "caller.wav", tone(0.5, 8000), 8000, tail_s=20)
    async with softphone.Softphone(tmp_path / "person", wav, user="person", answer=True) as person, \
            softphone.Softphone(tmp_path / "caller", wav) as phone, aiohttp.ClientSession() as http:
        await phone.dial(f"sip:sub250@127.0.0.1:{server.sip.port}")
        await phone.wait_for("CALL_ESTABLISHED", 10)
        await until(lambda: len(server.calls) == 1, 5)
        (call,) = server.calls.values()
        url = f"http://127.0.0.1:{server.port}/v1/realtime/calls/{call.id}/refer"
        async with http.post(url, json={"target_uri": person.uri},
                             headers={"Authorization": f"Bearer {TEST_KEY}"}) as resp:
            body = await resp.json()
            assert resp.status == 200, body
        through = await person.wait_for("CALL_ESTABLISHED", 10)  # it answers by itself
        assert through.get("peeruri", "").startswith("sip:caller@"), through  # the caller, put through
        await until(lambda: not server.calls, 10)  # the server's leg is gone once the caller is through
        assert sessions[0].closed
