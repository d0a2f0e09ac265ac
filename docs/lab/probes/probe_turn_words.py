#!/usr/bin/env python
"""How Whisper hears the words before a pause, and whether the session would hold that pause (the profile's ASR
and TTS only; no server):

    .venv/bin/python docs/lab/probes/probe_turn_words.py [--reps 10] [PREFIX ...]

Each prefix ("How far from the") is spoken by Piper ``--reps`` times (its voice varies between renderings) and
transcribed as the reply held at a pause transcribes it (the profile's window and final beams); prints each
transcript, whether it ends open (``app/session/turn_cue.py``: the pause would be held to ``[vad] hold_open_ms``)
and the count.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

PREFIXES = ["How far from the", "What happens to my", "My order number is four five", "I want to ask about my"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("prefixes", nargs="*", default=PREFIXES)
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args()
    import numpy as np
    import soxr

    from sub250.asr.whisper import WhisperASR
    from sub250.audio.rates import ASR_RATE
    from sub250.config import Settings
    from sub250.modelstore import prepare
    from sub250.profiles import load_profile
    from sub250.session.turn_cue import ends_open
    from sub250.tts.piper import PiperTTS

    settings = Settings.from_env()
    profile = load_profile(settings.profile)
    models = prepare(profile, settings.models_dir, stages=("asr", "tts"))
    tts = PiperTTS(models["tts"]["model"], models["tts"]["config"], profile.stage("tts"))
    tts.load()
    asr = WhisperASR(models["asr"]["model"], dict(profile.stage("asr")))
    asr.load()
    lead = np.zeros(int(0.3 * ASR_RATE), dtype=np.float32)  # the prefix padding a turn's audio starts with
    for prefix in args.prefixes:
        held = 0
        for _ in range(args.reps):
            chunks = list(tts.synthesize(prefix))
            pcm = np.frombuffer(b"".join(c.pcm16 for c in chunks), dtype="<i2").astype(np.float32) / 32768
            audio = np.concatenate([lead, soxr.resample(pcm, chunks[0].sample_rate, ASR_RATE)])
            text = asr.transcribe(audio, final=True).text
            held += ends_open(text)
            print(f"  {prefix!r:<34} -> {text!r:<44} {'held' if ends_open(text) else 'not held'}")
        print(f"{prefix!r}: held in {held} of {args.reps} renderings\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
