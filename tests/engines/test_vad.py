import asyncio

import numpy as np
import pytest

from sub250.audio.pcm import pcm16_to_float32, resample
from sub250.audio.rates import ASR_RATE
from sub250.audio.vad import SileroVAD, WINDOW

pytestmark = pytest.mark.engines


def windows(audio: np.ndarray) -> list[np.ndarray]:
    return [audio[i : i + WINDOW] for i in range(0, audio.size - WINDOW + 1, WINDOW)]


async def test_vad_tells_speech_from_silence(stack):
    pcm16, rate = await asyncio.to_thread(stack.tts.render, "Where can I buy a replacement filter?")
    speech = resample(pcm16_to_float32(pcm16), rate, ASR_RATE)
    silence = np.zeros(ASR_RATE, dtype=np.float32)
    vad = SileroVAD(stack.vad_session)
    p_sil = [vad.probability(w) for w in windows(silence)]
    p_speech = [vad.probability(w) for w in windows(speech)]
    assert max(p_sil) < 0.2
    assert sum(p > 0.5 for p in p_speech) > len(p_speech) * 0.4


def test_vad_rejects_wrong_window(stack):
    with pytest.raises(ValueError):
        SileroVAD(stack.vad_session).probability(np.zeros(480, dtype=np.float32))
