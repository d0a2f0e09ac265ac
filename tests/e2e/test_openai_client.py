"""The official `openai` package connects unchanged and completes an audio turn and a text turn."""

import asyncio
import base64

import pytest
import soundfile as sf
import soxr
from openai import AsyncOpenAI

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"


async def collect(conn, timeout=120):
    events = []

    async def run():
        async for event in conn:
            events.append(event)
            if event.type == "response.done":
                return

    await asyncio.wait_for(run(), timeout)
    return events


async def test_openai_client_text_and_audio_turns(server, speak):
    client = AsyncOpenAI(api_key=TEST_KEY, base_url=f"http://127.0.0.1:{server.port}/v1")
    async with client.realtime.connect(model="smollm2-135m-instruct") as conn:
        created = await conn.recv()
        assert created.type == "session.created"
        assert created.session.audio.input.format.rate == 24000

        # text turn
        await conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        await conn.conversation.item.create(item={
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "How much is the yearly Care+ membership?"}]})
        await conn.response.create()
        events = await collect(conn)
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert events[-1].response.status == "completed"
        assert text.strip()
        assert any(e.type == "session.updated" for e in events)

        # audio turn, streamed like a microphone (20 ms frames at real-time pace)
        await conn.session.update(session={"type": "realtime", "output_modalities": ["audio"]})
        data, rate = sf.read(str(speak("How often do I need to buy a new filter?")), dtype="float32")
        pcm = (soxr.resample(data, rate, 24000) * 32767).astype("<i2").tobytes()
        pcm += bytes(24000 * 2)  # one second of silence ends the turn (server VAD)
        step = 960
        for i in range(0, len(pcm), step):
            await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i:i + step]).decode())
            await asyncio.sleep(0.02)
        events = await collect(conn)
        types = [e.type for e in events]
        assert "input_audio_buffer.speech_started" in types and "input_audio_buffer.committed" in types
        transcript = [e for e in events if e.type == "conversation.item.input_audio_transcription.completed"]
        assert transcript and "filter" in transcript[0].transcript.lower()
        audio = b"".join(base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta")
        assert len(audio) > 24000 * 2  # more than a second of reply audio
        assert events[-1].response.status == "completed"
