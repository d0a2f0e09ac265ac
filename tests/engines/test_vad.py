import asyncio

import numpy as np
import pytest

from app.audio.pcm import pcm16_to_float32, resample
from app.audio.vad import SileroVAD, VADStream

pytestmark = pytest.mark.engines


async def test_vad_tells_speech_from_silence(stack):
    chunks = await asyncio.to_thread(lambda: list(stack.tts.synthesize("Where can I buy a replacement filter?")))
    speech = resample(pcm16_to_float32(b"".join(c.pcm16 for c in chunks)), chunks[0].sample_rate, 16000)
    silence = np.zeros(16000, dtype=np.float32)
    stream = VADStream(SileroVAD(stack.vad_session))
    p_sil = stream.feed(silence)
    p_speech = stream.feed(speech)
    assert max(p_sil) < 0.2
    assert sum(p > 0.5 for p in p_speech) > len(p_speech) * 0.4


def test_vad_rejects_wrong_window(stack):
    with pytest.raises(ValueError):
        SileroVAD(stack.vad_session).probability(np.zeros(480, dtype=np.float32))


def test_vad_stream_keeps_remainder(stack):
    stream = VADStream(SileroVAD(stack.vad_session))
    assert len(stream.feed(np.zeros(700, dtype=np.float32))) == 1
    assert len(stream.feed(np.zeros(400, dtype=np.float32))) == 1  # 188 + 400 >= 512
