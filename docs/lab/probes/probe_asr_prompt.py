#!/usr/bin/env python
"""Whisper with and without a transcription prompt, on questions Piper speaks (the profile's ASR and TTS only):

    .venv/bin/python docs/lab/probes/probe_asr_prompt.py [--window audio|30s]
        [--prompt "Halden Aero, Care+ ..."] [QUESTION ...]

Prints each question's transcript unprimed and primed (``audio.input.transcription.prompt``), and the call times.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

QUESTIONS = ["Does the Halden Aero need a Wi-Fi connection?", "How much does the Halden Aero cost?",
             "What does Halden Care+ include?", "How long does the PetGuard filter last?",
             "What is the TriLayer filter made of?", "Can I pause my Care+ membership?",
             "How loud is the Aero on the Whisper speed?", "How do I reset my Halden ID password?"]
PROMPT = "Halden Aero, Halden Care+, PetGuard, TriLayer, Halden ID, Wi-Fi."


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("questions", nargs="*", default=QUESTIONS)
    p.add_argument("--window", default="audio", choices=("audio", "30s"))
    p.add_argument("--prompt", default=PROMPT)
    args = p.parse_args()
    import numpy as np
    import soxr

    from sub250.config import Settings
    from sub250.stack import Stack

    stack = Stack.from_settings(Settings.from_env())
    await stack.start(("asr", "tts"))
    try:
        for question in args.questions:
            chunks = list(stack.tts.synthesize(question))
            pcm = np.frombuffer(b"".join(c.pcm16 for c in chunks), dtype="<i2").astype(np.float32) / 32768
            audio = soxr.resample(pcm, chunks[0].sample_rate, 16000).astype(np.float32)
            plain = await stack.asr.recognize(audio, window=args.window, prompt="")
            primed = await stack.asr.recognize(audio, window=args.window, prompt=args.prompt)
            print(f"{question!r}\n  unprimed: {plain.text!r} ({plain.compute_seconds * 1000:.0f} ms)\n"
                  f"  primed:   {primed.text!r} ({primed.compute_seconds * 1000:.0f} ms)", flush=True)
    finally:
        await stack.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
