"""G.711 both ways on the real server: a real recording, μ-law at 8 kHz as a phone bridge sends it (encoded by
libsndfile, not by us), heard right; the spoken reply comes back as μ-law that libsndfile decodes to speech."""

import base64
import io
import json
import re

import numpy as np
import pytest
import soundfile as sf
import soxr
from websockets.asyncio.client import connect

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"


def words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


@pytest.mark.asyncio(loop_scope="session")
async def test_a_mu_law_caller_is_heard_and_answered_in_mu_law(ws_url, real_audio, stack):
    data, rate = sf.read(str(real_audio / "goforward.wav"), dtype="float32")
    narrow = soxr.resample(data, rate, 8000)
    call = np.concatenate([np.zeros(2400, np.float32), narrow, np.zeros(8000, np.float32)])  # 0.3 s, speech, 1 s
    wire = io.BytesIO()
    sf.write(wire, call, 8000, format="RAW", subtype="ULAW")
    mu_law = wire.getvalue()
    assert len(mu_law) == call.size  # one byte a sample

    async with connect(ws_url, additional_headers={"Authorization": f"Bearer {TEST_KEY}"}) as ws:
        async def until(etype: str) -> list[dict]:
            got = []
            while True:
                ev = json.loads(await ws.recv())
                got.append(ev)
                assert ev["type"] != "error", ev
                if ev["type"] == etype:
                    return got

        await until("session.created")
        await ws.send(json.dumps({"type": "session.update", "session": {"type": "realtime", "audio": {
            "input": {"format": {"type": "audio/pcmu"}}, "output": {"format": {"type": "audio/pcmu"}}}}}))
        updated = (await until("session.updated"))[-1]["session"]["audio"]
        assert updated["input"]["format"] == updated["output"]["format"] == {"type": "audio/pcmu"}
        for i in range(0, len(mu_law), 160):  # 20 ms frames, as a phone sends them
            await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                      "audio": base64.b64encode(mu_law[i:i + 160]).decode()}))
        events = await until("response.done")
    assert events[-1]["response"]["status"] == "completed"
    heard = next(e for e in events if e["type"] == "conversation.item.input_audio_transcription.completed")
    assert words(heard["transcript"])[:2] == ["go", "forward"], heard  # Whisper on fixed input: deterministic
    assert not [e for e in events if e["type"].startswith("sub250.")]  # not asked for

    said = "".join(e["delta"] for e in events if e["type"] == "response.output_audio_transcript.delta")
    reply = b"".join(base64.b64decode(e["delta"]) for e in events if e["type"] == "response.output_audio.delta")
    pcm, reply_rate = sf.read(io.BytesIO(reply), dtype="float32", format="RAW", subtype="ULAW", samplerate=8000,
                              channels=1)
    assert reply_rate == 8000 and pcm.size == len(reply)
    seconds = pcm.size / 8000
    assert 0.15 * len(words(said)) < seconds < 1.5 * len(words(said)) + 1, (seconds, said)  # speech-paced
    assert np.sqrt(np.mean(pcm ** 2)) > 0.02  # sound, not silence
    # the reply is speech its own words can be heard in (Piper renders with noise; half of them is ample)
    heard_back = stack.asr.transcribe(soxr.resample(pcm, 8000, 16000).astype(np.float32)).text
    expected = set(words(said))
    assert len(expected & set(words(heard_back))) >= len(expected) / 2, (said, heard_back)
