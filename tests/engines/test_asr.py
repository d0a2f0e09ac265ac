"""The default profile's Whisper (base, on the cut window) on real recordings: WER <= 15 % overall
(tests/data/audio)."""

import asyncio
import difflib
import json
import re

import jiwer
import pytest
from transformers.models.whisper.english_normalizer import EnglishTextNormalizer

from sub250.audio.pcm import load_audio

pytestmark = pytest.mark.engines

# Whisper's own English normalizer (numbers to digits, punctuation and case away), applied to both sides.
normalize = EnglishTextNormalizer({})


async def test_real_recordings_wer_at_most_15_percent(stack, real_audio):
    folder = real_audio
    refs = json.loads((folder / "transcripts.json").read_text())
    hyps, gold = [], []
    for name, ref in sorted(refs.items()):
        audio = load_audio(str(folder / f"{name}.wav"))
        tr = await asyncio.to_thread(stack.asr.transcribe, audio)
        hyps.append(normalize(tr.text))
        gold.append(normalize(ref))
        print(f"{name:>12}: {tr.text!r} ({tr.compute_seconds * 1000:.0f} ms for {tr.audio_seconds:.1f} s)")
    wer = jiwer.wer(gold, hyps)
    print(f"overall WER {wer:.1%} over {len(gold)} recordings")
    assert wer <= 0.15


async def test_silence_gives_no_words(stack):
    import numpy as np

    tr = await asyncio.to_thread(stack.asr.transcribe, np.zeros(16000, dtype=np.float32))
    assert len(normalize(tr.text).split()) <= 2  # Whisper may emit a filler on silence, never a sentence


async def test_cut_window_is_faster_and_still_hears_speech(stack):
    """The short encoder window (profile [asr] window = "audio", the default profile's) against Whisper's 30 s."""
    from sub250.asr.whisper import WhisperASR
    from sub250.audio.pcm import pcm16_to_float32, resample

    pcm16, rate = await asyncio.to_thread(stack.tts.render, "Please replace the filter every nine months.")
    audio = resample(pcm16_to_float32(pcm16), rate, 16000)
    cut = WhisperASR(stack.asr.model_ref, dict(stack.asr.cfg, window="audio"))
    cut.model = stack.asr.model  # same loaded model, either window
    whole = WhisperASR(stack.asr.model_ref, dict(stack.asr.cfg, window="30s"))
    whole.model = whole.full_model = stack.asr.model
    full = await asyncio.to_thread(whole.transcribe, audio)
    short = await asyncio.to_thread(cut.transcribe, audio)
    assert "filter" in short.text.lower() and "nine months" in normalize(short.text).replace("9", "nine")
    assert short.compute_seconds < full.compute_seconds
    # both windows report how sure the model was: clear speech passes the interruption check's confidence test
    # (app/session/interruption.py) on either, with a mean token log-probability of a few tenths below zero
    from sub250.session.interruption import InterruptionOptions, takes_the_turn

    print(f"avg_logprob cut {short.avg_logprob:.3f}, 30 s {full.avg_logprob:.3f}; "
          f"no_speech cut {short.no_speech_prob:.3f}, 30 s {full.no_speech_prob:.3f}")
    for tr in (short, full):
        assert -1.0 < tr.avg_logprob < 0
        assert takes_the_turn(tr, InterruptionOptions())


def name_likeness(text: str, name: str) -> float:
    """How close the transcript comes to spelling ``name``: the best difflib ratio over its runs of as many words."""
    words, n = text.split(), len(name.split())
    runs = [" ".join(words[i : i + n]) for i in range(max(1, len(words) - n + 1))]
    return max(difflib.SequenceMatcher(None, run, name).ratio() for run in runs)


@pytest.mark.parametrize("window", ["audio", "30s"])
async def test_a_prompt_primes_the_names_on_both_windows(stack, speak, window):
    """Whisper's previous-text prompt (``audio.input.transcription.prompt``, ``[asr] prompt``): the question is still
    transcribed whole, and the primed name comes out spelled (nearly) as the prompt spells it, at least as close as
    without the prompt.

    Not an exact match: the int8 kernels differ by CPU, and a CI machine heard "Halben Aero" with the prompt
    ("Halbin-Aaronita" without it) where this one hears "Halden Aero". A prompt that was dropped gives the unprimed
    transcript, which on the cut window is far off (likeness ~0.6 < 0.8)."""
    audio = load_audio(str(speak("Does the Halden Aero need a Wi-Fi connection?")))
    plain = await asyncio.to_thread(stack.asr.transcribe, audio, window=window, prompt="")
    primed = await asyncio.to_thread(stack.asr.transcribe, audio, window=window, prompt="Halden Aero, Care+, PetGuard.")
    text, unprimed = normalize(primed.text), normalize(plain.text)
    likeness, before = name_likeness(text, "halden aero"), name_likeness(unprimed, "halden aero")
    print(f"{window}: unprimed {plain.text!r} ({before:.2f}), primed {primed.text!r} ({likeness:.2f})")
    assert "aero" in text.split() and likeness >= 0.8 and likeness >= before
    # "Wi-Fi", "Wi Fi" or "wifi": one word, spelled three ways (a CI run's rendering was heard "a wifi connection")
    assert re.search(r"\bwi[ -]?fi\b", text) and "connection" in text
