import asyncio

import numpy as np
import pytest

pytestmark = pytest.mark.engines


async def test_piper_returns_22khz_speech_for_a_sentence(stack):
    chunks = await asyncio.to_thread(lambda: list(stack.tts.synthesize("The filter lasts about six months.")))
    assert len(chunks) == 1  # one chunk per sentence
    c = chunks[0]
    assert c.sample_rate == 22050
    samples = np.frombuffer(c.pcm16, dtype="<i2")
    assert 0.8 < c.seconds < 6.0
    assert np.abs(samples).max() > 1000  # audible, not silence
    assert np.abs(samples[: int(0.05 * 22050)]).mean() < np.abs(samples).mean()  # starts quieter than speech


async def test_two_sentences_give_two_chunks(stack):
    chunks = await asyncio.to_thread(lambda: list(stack.tts.synthesize("Hello there. How can I help you today?")))
    assert len(chunks) == 2


async def test_a_rendering_is_the_same_bytes_every_time_while_the_live_voice_varies(stack):
    """The tests' speech (PiperTTS.render: no generator or width noise) is identical call after call, so a
    test's ASR input never changes; the voice callers hear samples its noise afresh."""
    text = "How many years is the motor guaranteed for?"
    first, rate = await asyncio.to_thread(stack.tts.render, text)
    second, _ = await asyncio.to_thread(stack.tts.render, text)
    assert rate == 22050 and len(first) > rate  # over half a second of PCM16
    assert first == second
    live = [await asyncio.to_thread(lambda: b"".join(c.pcm16 for c in stack.tts.synthesize(text))) for _ in range(3)]
    assert len(set(live)) > 1, "three live renderings, all identical: the voice lost its noise"


async def test_tts_speech_is_understood_by_asr(stack):
    """Loop-back: what Piper says, Whisper hears (both real engines)."""
    from sub250.audio.pcm import pcm16_to_float32, resample

    text = "Please unplug the purifier before you open the filter door."
    pcm16, rate = await asyncio.to_thread(stack.tts.render, text)
    audio = resample(pcm16_to_float32(pcm16), rate, 16000)
    tr = await asyncio.to_thread(stack.asr.transcribe, audio)
    assert "filter" in tr.text.lower() and "unplug" in tr.text.lower()
