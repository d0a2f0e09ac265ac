"""smart-turn v3.2, the real model from its carrier (pipecat-ai, --no-deps), on a synthesized question: whole,
and cut mid-word. It must load, run on its own thread and answer probabilities; whether it tells the two apart
is what scripts/bench_endpointing.py measures, so it is printed here, not asserted."""

import numpy as np
import pytest

from sub250.audio.pcm import pcm16_to_float32, resample
from sub250.audio.rates import ASR_RATE
from sub250.audio.smart_turn import SmartTurn
from sub250.modelstore import prepare
from sub250.profiles import load_profile

pytestmark = pytest.mark.engines

QUESTION = "How far from the wall should I put my purifier?"


@pytest.fixture(scope="module")
def engine(settings):
    m = prepare(load_profile("cpu-base"), settings.models_dir, stages=("turn",))["turn"]
    st = SmartTurn(m["model"], load_profile("cpu-base").stage("turn"))
    st.load()
    yield st
    st.close()


@pytest.fixture(scope="module")
def question(settings):
    from sub250.tts.piper import PiperTTS

    profile = load_profile("cpu-base")
    m = prepare(profile, settings.models_dir, stages=("tts",))["tts"]
    tts = PiperTTS(m["model"], m["config"], profile.stage("tts"))
    tts.load()
    pcm16, rate = tts.render(QUESTION)
    return resample(pcm16_to_float32(pcm16), rate, ASR_RATE)


def cut_mid_word(audio: np.ndarray) -> np.ndarray:
    """Up to the loudest 30 ms around the middle of the speech: inside a word, not at a gap."""
    frame = int(0.03 * ASR_RATE)
    lo, hi = int(audio.size * 0.45), int(audio.size * 0.6)
    energy = [float(np.mean(audio[s : s + frame] ** 2)) for s in range(lo, hi, frame // 3)]
    return audio[: lo + int(np.argmax(energy)) * (frame // 3) + frame // 2]


async def test_probabilities_of_a_whole_and_a_cut_question(engine, question):
    silence = np.zeros(int(0.2 * ASR_RATE), dtype=np.float32)  # the pause after which it is asked
    lead = np.zeros(int(0.3 * ASR_RATE), dtype=np.float32)
    whole = np.concatenate([lead, question, silence])
    cut = np.concatenate([lead, cut_mid_word(question), silence])
    p_whole = await engine.run(engine.probability, whole)
    p_cut = await engine.run(engine.probability, cut)
    print(f"\nsmart-turn: whole question p={p_whole:.3f}, cut mid-word p={p_cut:.3f}")
    assert 0.0 <= p_whole <= 1.0 and 0.0 <= p_cut <= 1.0
    # stateless: the same audio scores the same
    assert engine.probability(whole) == pytest.approx(p_whole, abs=1e-6)


def test_longer_than_8_seconds_and_silence(engine, question):
    long = np.concatenate([question] * 4)  # > 8 s: only the last 8 s are read
    assert 0.0 <= engine.probability(long) <= 1.0
    assert 0.0 <= engine.probability(np.zeros(ASR_RATE, dtype=np.float32)) <= 1.0
