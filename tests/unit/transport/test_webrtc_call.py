"""The WebRTC call as the session's transport: reply audio goes raw onto the track (tagged, finished by
audio_done), events onto the data channel's outbox, and caller audio reaches the session as PCM16 at
ASR_RATE (the new handle_audio signature)."""

import asyncio
import fractions

import av
import numpy as np
import pytest
from aiortc.mediastreams import MediaStreamError

from sub250.audio.rates import ASR_RATE, OUTPUT_RATE
from sub250.gateway import GatewayLimits, KeyLimiter, Principal
from sub250.protocol import server_event
from sub250.transport.webrtc import WebRTCCall, pcm16_of


class MicTrack:
    """48 kHz stereo frames of 20 ms (what aiortc's Opus decoder yields), then the end of the track."""

    def __init__(self, frames: int) -> None:
        self.left, self.pts = frames, 0

    async def recv(self) -> av.AudioFrame:
        if not self.left:
            raise MediaStreamError
        self.left -= 1
        samples = (np.sin(np.arange(960) / 10) * 8000).astype("<i2")
        frame = av.AudioFrame.from_ndarray(np.repeat(samples, 2).reshape(1, -1), format="s16", layout="stereo")
        frame.sample_rate, frame.pts, frame.time_base = 48000, self.pts, fractions.Fraction(1, 48000)
        self.pts += 960
        return frame


async def test_reply_audio_goes_raw_onto_the_track_and_events_onto_the_channel(sessions):
    call = WebRTCCall("rtc_test", Principal("k"), object(), KeyLimiter(GatewayLimits()))
    try:
        session = sessions[0]
        assert session.transport is call
        sent = []
        pcm = (np.arange(OUTPUT_RATE // 50) % 100 + 1).astype("<i2").tobytes()  # 20 ms, never zero
        call.send_audio(pcm, response_id="resp_1", item_id="item_1", on_sent=sent.append)
        call.send_audio(memoryview(pcm), response_id="resp_1", item_id="item_1")
        call.audio_done("resp_1")
        call.send(server_event("response.done", response={"id": "resp_1"}))
        assert len(call.outbox) == 1  # nothing but the event went to the data channel
        frames = [await call.track.recv() for _ in range(3)]
        assert frames[0].to_ndarray().reshape(-1).tobytes() == pcm and sent and sent[0] > 0
        assert (frames[2].to_ndarray() == 0).all()  # then silence
        assert [e for e in _queued_types(call) if e.startswith("output_audio_buffer")] == [
            "output_audio_buffer.started", "output_audio_buffer.stopped"]
        # a reply that queued no audio reports nothing, and audio_done leaves no state behind
        call.audio_done("resp_silent")
        await call.track.recv()
        assert "resp_silent" not in call.track._finished
        # barge-in: the queued audio of a reply is purged and the client told
        call.send_audio(pcm * 10, response_id="resp_2", item_id="item_2")
        assert call.purge("resp_2") == 1
        assert _queued_types(call)[-1] == "output_audio_buffer.cleared"
    finally:
        await call.close()


async def test_caller_audio_reaches_the_session_as_pcm16_at_the_asr_rate(sessions):
    call = WebRTCCall("rtc_test", Principal("k"), object(), KeyLimiter(GatewayLimits()))
    inbound = asyncio.ensure_future(call._inbound())
    try:
        await call._read_audio(MicTrack(frames=50))  # one second
        for _ in range(200):
            if call._inbox.empty():
                break
            await asyncio.sleep(0.01)
        audio = sessions[0].audio
        assert audio and all(isinstance(pcm, bytes) and rate == ASR_RATE and ns > 0 for pcm, rate, ns in audio)
        total = sum(len(pcm) for pcm, _, _ in audio) // 2
        assert abs(total - ASR_RATE) < ASR_RATE // 20  # about one second at 16 kHz (the resampler holds a little)
        level = np.abs(np.frombuffer(b"".join(p for p, _, _ in audio), dtype="<i2")).max()
        assert 4000 < level < 12000  # mono, not halved nor doubled
    finally:
        inbound.cancel()
        await call.close()


def test_pcm16_of_a_resampled_frame():
    frame = av.AudioFrame.from_ndarray(np.array([[1, -2, 3]], dtype="<i2"), format="s16", layout="mono")
    assert pcm16_of(frame) == np.array([1, -2, 3], dtype="<i2").tobytes()


def _queued_types(call) -> list[str]:
    import json

    return [json.loads(item.text)["type"] for item in call.outbox._q]


async def _offer() -> tuple[object, str]:
    from aiortc import RTCPeerConnection

    pc = RTCPeerConnection()
    pc.addTransceiver("audio", direction="sendrecv")
    pc.createDataChannel("oai-events")
    await pc.setLocalDescription(await pc.createOffer())
    return pc, pc.localDescription.sdp


async def test_the_official_clients_multipart_calls_create_is_answered_and_configures_the_session(make_server,
                                                                                                 sessions):
    import openai
    from openai import AsyncOpenAI

    from tests.unit.transport.conftest import TEST_KEY

    srv = await make_server()
    client = AsyncOpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key=TEST_KEY, max_retries=0)
    pc, offer = await _offer()
    try:
        answer = await client.realtime.calls.create(sdp=offer, session={"type": "realtime", "instructions": "Be brief."})
        assert answer.text.startswith("v=0") and "m=audio" in answer.text
        assert sessions[-1].configured == [{"type": "realtime", "instructions": "Be brief."}]
        assert len(srv.calls) == 1
        answer = await client.realtime.calls.create(sdp=offer)  # no session part: nothing to configure
        assert sessions[-1].configured == [] and len(srv.calls) == 2
        with pytest.raises(openai.BadRequestError) as err:  # a session field the session refuses: 400, no call
            await client.realtime.calls.create(sdp=offer, session={"type": "realtime", "instructions": 5})
        assert err.value.status_code == 400 and "instructions" in str(err.value) and len(srv.calls) == 2
    finally:
        await pc.close()
        await client.close()
        for call in list(srv.calls.values()):
            await call.close("test over")


async def test_a_multipart_offer_without_sdp_or_with_a_bad_session_part_is_a_400(make_server):
    from tests.unit.transport.conftest import TEST_KEY
    from tests.unit.transport.test_front_door import post

    srv = await make_server()
    auth = {"Authorization": f"Bearer {TEST_KEY}"}

    def form(*parts):
        b = b"".join(b'--B\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % p for p in parts) + b"--B--\r\n"
        return b, {**auth, "Content-Type": "multipart/form-data; boundary=B"}

    for parts, code in [(((b"session", b"{}"),), "invalid_sdp"), (((b"sdp", b"v=0\r\nm=audio"), (b"session", b"[1]")),
                                                                   "invalid_value"),
                        (((b"sdp", b"v=0\r\nm=audio"), (b"session", b"{nope")), "invalid_json"),
                        (((b"sdp", b"\xff\xfe"),), "invalid_sdp")]:
        head, body = await post(srv.port, "/v1/realtime/calls", *form(*parts))
        assert head.startswith(b"HTTP/1.1 400"), (parts, head)
        assert body["error"]["code"] == code, (parts, body)
    assert not srv.calls


async def test_output_audio_buffer_clear_drops_the_queued_reply_audio_and_says_so(sessions):
    call = WebRTCCall("rtc_test", Principal("k"), object(), KeyLimiter(GatewayLimits()))
    try:
        pcm = np.full(OUTPUT_RATE, 500, dtype="<i2").tobytes()  # a second of reply audio
        call.send_audio(pcm, response_id="resp_1", item_id="item_1")
        call.send_audio(pcm, response_id="resp_2", item_id="item_2")
        assert call.clear_audio("resp_1") is True
        assert [tag for tag, _ in call.track.pending()] == ["resp_2"]
        assert _queued_types(call)[-1] == "output_audio_buffer.cleared"
        assert call.clear_audio(None) and call.track.pending() == []  # everything queued
    finally:
        await call.close()


async def test_a_call_is_idle_only_once_its_reply_audio_has_played(sessions):
    """What a drain asks before closing a call (it called ``queued_ms``, a property, and raised)."""
    call = WebRTCCall("rtc_idle", Principal("k"), object(), KeyLimiter(GatewayLimits()))
    try:
        assert call.idle
        call.send_audio(bytes(OUTPUT_RATE // 50 * 2 * 5), response_id="resp_1", item_id="item_1")  # 100 ms
        assert not call.idle
        while call.track.queued_ms:
            await call.track.recv()
        assert call.idle is (len(call.outbox) == 0)  # played: only events not yet written keep it busy
    finally:
        await call.close()
