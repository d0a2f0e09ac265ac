#!/usr/bin/env python
"""What the interruption check hears in backchannels and in short interruptions, offline, with its confidence
test (``[interruption] min_confidence``, app/session/interruption.py) and without it.

    flock /tmp/team/engines.lock .venv/bin/python docs/lab/probes/probe_backchannels.py [--out reports/backchannels]
        [--min-confidence -1.3]

Each phrase is spoken by the profile's Piper voice in six renderings (length_scale 0.85 / 1.0 / 1.2, each with
Piper's default sampling noise and with noise_scale = noise_w_scale = 1.0), preceded by 0.3 s of silence (the
session's prefix padding). The check is run as the session runs it: the profile's Whisper on the partial window
with no prompt, over the sound so far at each check point (``check_after_ms``, then every ``recheck_ms``) and
once over the whole sound (its pause). A rendering takes the turn when any of its checks does. Prints, per
phrase, the renderings that took the turn without and with the test, and for the interruptions the first check
point (ms of sound) that took it; writes ``<out>.json`` with every check's text, no-speech probability and
mean log-probability. Tuning on these renderings is tuning on Piper's voice: the live trials
(scripts/bench_interruptions.py) are the measure that counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

BACKCHANNELS = ("Uh-huh.", "Mm-hmm.", "Mhm.", "Yeah.", "Okay.", "Right.", "I see.", "Sure.", "Hmm.")
INTERRUPTIONS = ("Stop.", "Wait.", "Wait, stop.", "No, no.", "Hold on.", "Sorry, what?",
                 "Actually, I have a question.", "Can you repeat that?", "How much does it cost?")
RENDERINGS = [(length, noise) for length in (0.85, 1.0, 1.2) for noise in (None, 1.0)]
PAD_S = 0.3
RATE = 16000


def speak(tts, text: str, length: float, noise: float | None):
    import numpy as np
    from piper.config import SynthesisConfig

    from sub250.audio.pcm import pcm16_to_float32, resample

    config = SynthesisConfig(length_scale=length, noise_scale=noise, noise_w_scale=noise)
    chunks = list(tts.voice.synthesize(text, syn_config=config))
    audio = resample(pcm16_to_float32(b"".join(c.audio_int16_bytes for c in chunks)), chunks[0].sample_rate, RATE)
    return np.concatenate([np.zeros(int(PAD_S * RATE), dtype=np.float32), audio])


async def probe(args) -> dict:
    from sub250.config import Settings
    from sub250.session.interruption import InterruptionOptions, takes_the_turn
    from sub250.session.tuning import PipelineTuning
    from sub250.stack import Stack

    stack = Stack.from_settings(Settings.from_env())
    await stack.start(("asr", "tts"))
    tuning = PipelineTuning.from_profile(stack.profile)
    opts = tuning.interruption
    gate = replace(opts, min_confidence=args.min_confidence)
    plain = replace(opts, min_confidence=None)
    print(f"profile {stack.profile.name}; checks at {opts.check_after_ms} ms of sound, then every "
          f"{opts.recheck_ms} ms, and over the whole sound; window {tuning.partial_window!r}; "
          f"min_confidence {args.min_confidence}", flush=True)
    rows = []
    for kind, phrases in (("backchannel", BACKCHANNELS), ("interruption", INTERRUPTIONS)):
        for text in phrases:
            for length, noise in RENDERINGS:
                audio = await asyncio.to_thread(speak, stack.tts, text, length, noise)
                sound_ms = (audio.size / RATE - PAD_S) * 1000
                points = list(range(opts.check_after_ms, int(sound_ms), opts.recheck_ms)) + [int(sound_ms)]
                checks = []
                for ms in points:
                    cut = audio[: int((PAD_S + ms / 1000) * RATE)]
                    tr = await asyncio.to_thread(stack.asr.transcribe, cut, window=tuning.partial_window, prompt="")
                    checks.append({"ms": ms, "text": tr.text, "no_speech_prob": tr.no_speech_prob,
                                   "avg_logprob": tr.avg_logprob, "without_test": takes_the_turn(tr, plain),
                                   "with_test": takes_the_turn(tr, gate)})
                first = {k: next((c["ms"] for c in checks if c[k]), None) for k in ("without_test", "with_test")}
                rows.append({"kind": kind, "text": text, "length_scale": length, "noise": noise,
                             "sound_ms": round(sound_ms), "checks": checks, "first_take_ms": first})
            said = [r for r in rows if r["text"] == text]
            print(f"{kind:>12} {text!r:32} " + " ".join(
                f"{k}: {sum(r['first_take_ms'][k] is not None for r in said)}/{len(said)}"
                for k in ("without_test", "with_test")), flush=True)
    await stack.close()
    return {"profile": stack.profile.name, "min_confidence": args.min_confidence, "rows": rows}


def summarize(report: dict) -> str:
    lines = ["| phrases | renderings | took the turn, without the test | with it | first check that took it, ms "
             "(median, without / with) |", "|---|---|---|---|---|"]
    for kind in ("backchannel", "interruption"):
        rows = [r for r in report["rows"] if r["kind"] == kind]
        cells = []
        medians = []
        for k in ("without_test", "with_test"):
            took = sorted(r["first_take_ms"][k] for r in rows if r["first_take_ms"][k] is not None)
            cells.append(f"{len(took)}/{len(rows)}")
            medians.append(str(took[len(took) // 2]) if took else "-")
        lines.append(f"| {kind}s | {len(rows)} | {cells[0]} | {cells[1]} | {' / '.join(medians)} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="reports/backchannels")
    ap.add_argument("--min-confidence", type=float, default=-1.3)
    args = ap.parse_args()
    report = asyncio.run(probe(args))
    table = summarize(report)
    print(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    print(f"wrote {out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
