"""A voice turn over WebRTC (aiortc on both ends, real engines): SDP over HTTP, audio on the tracks,
events on the ``oai-events`` data channel, and the call cleaned up when the peer goes away."""

import asyncio
import json
import urllib.request

import numpy as np
import pytest
import soundfile as sf

from tests.e2e.helpers import LLM_ANSWERS

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


@pytest.fixture(scope="module")
def question_wav(speak, tmp_path_factory):
    """A question with a second of silence before it and two after (room for the endpointer)."""
    data, rate = sf.read(speak("How long does the filter last?"), dtype="int16")
    pad = lambda s: np.zeros(int(s * rate), dtype=np.int16)  # noqa: E731
    path = tmp_path_factory.mktemp("rtc") / "question.wav"
    sf.write(path, np.concatenate([pad(1.0), data, pad(2.5)]), rate, subtype="PCM_16")
    return path


class RTCClient:
    """The smallest real WebRTC client: microphone = a WAV file, speaker = a frame counter."""

    def __init__(self, base: str, wav) -> None:
        from aiortc import RTCPeerConnection
        from aiortc.contrib.media import MediaPlayer

        self.base = base
        self.pc = RTCPeerConnection()
        self.player = MediaPlayer(str(wav))
        self.pc.addTrack(self.player.audio)
        self.channel = self.pc.createDataChannel("oai-events")
        self.events: list[dict] = []
        self.new_event = asyncio.Event()
        self.audio_frames = 0
        self.loud_frames = 0
        self.tasks: list[asyncio.Task] = []

        @self.channel.on("message")
        def on_message(msg: str) -> None:
            self.events.append(json.loads(msg))
            self.new_event.set()

        @self.pc.on("track")
        def on_track(track) -> None:
            self.tasks.append(asyncio.ensure_future(self._listen(track)))

    async def _listen(self, track) -> None:
        from aiortc.mediastreams import MediaStreamError

        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            self.audio_frames += 1
            if np.abs(frame.to_ndarray()).max() > 500:
                self.loud_frames += 1

    async def call(self, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        hdrs = {"Authorization": f"Bearer {TEST_KEY}", "Content-Type": "application/sdp", **(headers or {})}
        status, resp_headers, body = await asyncio.to_thread(
            _post, self.base + "/v1/realtime/calls", self.pc.localDescription.sdp.encode(), hdrs)
        if status == 201:
            from aiortc import RTCSessionDescription

            await self.pc.setRemoteDescription(RTCSessionDescription(sdp=body.decode(), type="answer"))
        return status, resp_headers, body

    async def wait_for(self, etype: str, timeout: float = 120, after: int = 0, where=lambda ev: True) -> dict:
        async def find() -> dict:
            while True:
                for ev in self.events[after:]:
                    if ev["type"] == etype and where(ev):
                        return ev
                self.new_event.clear()
                await self.new_event.wait()

        return await asyncio.wait_for(find(), timeout)

    def send(self, event: dict) -> None:
        self.channel.send(json.dumps(event))

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await self.pc.close()


@pytest.mark.asyncio(loop_scope="session")
async def test_voice_turn_over_webrtc(server, question_wav):
    client = RTCClient(server.url, question_wav)
    try:
        status, headers, _answer = await client.call()
        assert status == 201, _answer
        assert headers["Location"].startswith("/v1/realtime/calls/rtc_")
        created = await client.wait_for("session.created", timeout=30)
        assert created["session"]["type"] == "realtime"
        client.send({"type": "session.update", "session": {"include": ["sub250.latency"]}})  # our report, asked for
        transcript = await client.wait_for("conversation.item.input_audio_transcription.completed")
        assert "filter" in transcript["transcript"].lower()
        done = await client.wait_for("response.done")
        assert done["response"]["status"] == "completed"
        # the final latency report waits for the reply's first audio frame to leave on the track (a first,
        # non-final one comes earlier when the audio starts before the generation ends)
        latency = await client.wait_for("sub250.turn.latency", timeout=30, where=lambda ev: ev["final"])
        assert latency["final"] and latency["outcome"] == "completed"
        spans, marks = latency["spans"], latency["marks"]
        assert spans["ttft"] is not None and spans["ttft"] > 0
        assert spans["network_rtt"] is not None and 0 < spans["network_rtt"] < 1000, "RTT from RTCP reports"
        assert spans["ttft_client"] == pytest.approx(spans["ttft"] + spans["network_rtt"], abs=0.01)
        # an adopted speculative reply may have synthesized its first audio before the commit (LATENCY.md);
        # nothing of it leaves before the commit
        assert marks["first_audio"] <= marks["first_audio_sent"] and marks["turn_commit"] <= marks["first_audio_sent"]
        if not latency["speculative"]:
            assert marks["turn_commit"] <= marks["first_audio"]
        assert latency["beside"]["voice_to_voice"] is not None
        await client.wait_for("output_audio_buffer.started", timeout=30)
        await client.wait_for("output_audio_buffer.stopped", timeout=60)
        types = [e["type"] for e in client.events]
        # audio travels on the media track, never as base64 on the data channel
        assert "response.output_audio.delta" not in types
        await client.wait_for("output_audio_buffer.stopped", timeout=60)
        assert client.loud_frames > 25, "the reply should be heard on the server's track (> 0.5 s of sound)"
        assert len(server.calls) == 1
        call = next(iter(server.calls.values()))
    finally:
        await client.close()
    for _ in range(100):  # the peer went away: the server closes the call and forgets it
        if not server.calls:
            break
        await asyncio.sleep(0.1)
    assert server.calls == {}
    # nothing of it is left running: its tasks, its session's tasks, its track, its peer connection
    assert call.closed.is_set() and not call._tasks and not len(call.session.tasks)
    assert call.track.readyState == "ended" and call.pc.connectionState == "closed"


@pytest.mark.asyncio(loop_scope="session")
async def test_webrtc_refusals(server, question_wav):
    url = server.url + "/v1/realtime/calls"
    status, _, body = await asyncio.to_thread(_post, url, b"v=0\r\n", {"Content-Type": "application/sdp"})
    assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
    auth = {"Authorization": f"Bearer {TEST_KEY}"}
    status, _, body = await asyncio.to_thread(_post, url, b"{}", {**auth, "Content-Type": "application/json"})
    assert status == 415 and "application/sdp" in json.loads(body)["error"]["message"]
    status, _, body = await asyncio.to_thread(_post, url, b"v=0\r\nm=audio garbage\r\n",
                                              {**auth, "Content-Type": "application/sdp"})
    assert status == 400 and json.loads(body)["error"]["code"] == "invalid_sdp"
    status, _, body = await asyncio.to_thread(_post, url, b"m=" + b"x" * 100_000,
                                              {**auth, "Content-Type": "application/sdp"})
    assert status == 413
    assert server.calls == {}


@pytest.mark.asyncio(loop_scope="session")
async def test_client_secret_opens_a_call_and_expires(server, question_wav):
    status, _, body = await asyncio.to_thread(
        _post, server.url + "/v1/realtime/client_secrets", b'{"expires_after": {"seconds": 60}}',
        {"Authorization": f"Bearer {TEST_KEY}", "Content-Type": "application/json"})
    assert status == 200
    secret = json.loads(body)
    assert secret["value"].startswith("ek_") and secret["expires_at"] > 0
    client = RTCClient(server.url, question_wav)
    try:
        status, _, _ = await client.call({"Authorization": f"Bearer {secret['value']}"})
        assert status == 201
        await client.wait_for("session.created", timeout=30)
    finally:
        await client.close()
    forged = secret["value"][:-2] + ("AA" if not secret["value"].endswith("AA") else "BB")
    client = RTCClient(server.url, question_wav)
    try:
        status, _, body = await client.call({"Authorization": f"Bearer {forged}"})
        assert status == 401
    finally:
        await client.close()


def _pcm24(path) -> bytes:
    import soxr

    data, rate = sf.read(path, dtype="float32")
    return (np.clip(soxr.resample(data, rate, 24000), -1, 1) * 32767).astype("<i2").tobytes()


@pytest.mark.asyncio(loop_scope="session")
async def test_barge_in_over_webrtc(server, speak, stack):
    """The caller talks over the reply: it is cancelled, its queued audio dropped from the server's
    track (output_audio_buffer.cleared), the engine request aborted, and the next turn goes on."""
    from aiortc import RTCPeerConnection, RTCSessionDescription

    from sub250.transport.webrtc import ReplyTrack

    # spoken with the fixed rendering (``PiperTTS.render``), which Whisper hears word for word: a long question,
    # so the reply lasts well past the barge-in
    question = _pcm24(speak("Can you tell me everything about how the warranty works and what it covers?"))
    interruption = _pcm24(speak("Wait, stop. I have another question about my order."))
    mic = ReplyTrack()  # a real-time paced PCM track: our caller's microphone
    client = RTCClient.__new__(RTCClient)
    client.base, client.events, client.new_event, client.tasks = server.url, [], asyncio.Event(), []
    client.audio_frames = client.loud_frames = 0
    client.pc = RTCPeerConnection()
    client.pc.addTrack(mic)
    client.channel = client.pc.createDataChannel("oai-events")
    client.channel.on("message", lambda m: (client.events.append(json.loads(m)), client.new_event.set()))
    client.pc.on("track", lambda t: client.tasks.append(asyncio.ensure_future(client._listen(t))))
    try:
        status, _, body = await client.call()
        assert status == 201, body
        await client.wait_for("session.created", timeout=30)
        client.send({"type": "session.update", "session": {"max_output_tokens": 300,
                                                            **LLM_ANSWERS}})
        mic.push(None, question)  # ask it; the silence after it ends the turn
        heard = await client.wait_for("conversation.item.input_audio_transcription.completed", timeout=120)
        assert "warranty" in heard["transcript"].lower(), heard["transcript"]
        started = await client.wait_for("output_audio_buffer.started", timeout=120)
        first = started["response_id"]
        call = next(iter(server.calls.values()))
        assert any(chunk[0] == first for chunk in call.track._chunks), "the reply should be queued on the track"
        mic.push(None, interruption)  # talk over it
        done = None
        while done is None:
            ev = await client.wait_for("response.done", timeout=60, after=len(client.events) - 1)
            if ev["response"]["id"] == first:
                done = ev
            else:
                await asyncio.sleep(0.05)
        assert done["response"]["status"] == "cancelled"
        cleared = [e for e in client.events if e["type"] == "output_audio_buffer.cleared"]
        assert cleared and cleared[0]["response_id"] == first
        assert not any(chunk[0] == first for chunk in call.track._chunks), "nothing of the old reply stays queued"
        # the interruption is a turn of its own
        transcripts = []
        for _ in range(600):
            transcripts = [e["transcript"] for e in client.events
                           if e["type"] == "conversation.item.input_audio_transcription.completed"]
            if any("order" in t.lower() for t in transcripts):  # its words may come as one turn or two
                break
            await asyncio.sleep(0.1)
        assert any("order" in t.lower() for t in transcripts), transcripts
    finally:
        await client.close()
    engine = stack.llm._engine
    for _ in range(200):
        if engine.get_num_unfinished_requests() == 0 and not server.calls:
            break
        await asyncio.sleep(0.05)
    assert server.calls == {}
    assert engine.get_num_unfinished_requests() == 0
