#!/usr/bin/env python
"""Whisper's encoder window: full 30 s against cut to the utterance, on the replay corpus and the real recordings.

    .venv/bin/python scripts/bench_asr_window.py [--paddings 2.0] [--threads 1,2] [--beams 1,3]
        [--compute-types int8,float32] [--out reports/asr-window.json]

For each window (and thread count, beam width, compute type asked for) it transcribes every synthetic question
(scripts/corpus) and every real recording (tests/data/audio) and prints WER (Whisper's English normalizer on
both sides) and the p50/p95 of one call, as the ASR stage sees it (the profile's model: SUB250_PROFILE).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sub250.audio.pcm import load_audio  # noqa: E402
from scripts.bench.corpus import real_recordings, synthesize_corpus  # noqa: E402
from sub250.config import Settings  # noqa: E402
from sub250.modelstore import prepare  # noqa: E402
from sub250.profiles import load_profile  # noqa: E402


def main(args: argparse.Namespace) -> int:
    import jiwer
    from transformers.models.whisper.english_normalizer import EnglishTextNormalizer

    from sub250.asr.whisper import WhisperASR

    norm = EnglishTextNormalizer({})
    settings = Settings.from_env()
    profile = load_profile(settings.profile)
    model = prepare(profile, settings.models_dir, stages=("asr",))["asr"]["model"]
    groups = {"synthetic": synthesize_corpus(settings.home / "corpus"), "real": real_recordings()}
    audio = {u.id: load_audio(str(u.path)) for g in groups.values() for u in g}
    configs = [("30s", {"window": "30s"})] + [(f"audio+{p:g}s", {"window": "audio", "window_padding_s": p})
                                             for p in args.paddings]
    threads = [int(t) for t in args.threads.split(",")]
    configs = [(f"{n}/{t}thr" if len(threads) > 1 else n, dict(o, cpu_threads=t, full_window_cpu_threads=t)) for t in threads for n, o in configs]
    if args.beams:
        configs = [(f"{n}/beam{b}", dict(o, beam_size=b)) for b in args.beams for n, o in configs]
    if args.compute_types:
        configs = [(f"{n}/{c}", dict(o, compute_type=c)) for c in args.compute_types for n, o in configs]
    loaded: dict[tuple[int, str], object] = {}
    rows = []
    width = max(14, *(len(n) + 2 for n, _ in configs))
    print(f"{'window':<{width}}{'group':<11}{'n':>4}{'WER':>8}{'p50 ms':>9}{'p95 ms':>9}")
    for name, over in configs:
        asr = WhisperASR(model, dict(profile.stage("asr"), **over))
        key = (over["cpu_threads"], asr.cfg.get("compute_type", "int8"))
        if key not in loaded:  # one model per thread count and compute type; the beam is a per-call option
            asr.load()
            loaded[key] = asr.model
        asr.model = asr.full_model = loaded[key]
        for group, utts in groups.items():
            refs, hyps, ms = [], [], []
            for u in utts:
                tr = asr.transcribe(audio[u.id])
                refs.append(norm(u.reference or ""))
                hyps.append(norm(tr.text))
                ms.append(tr.compute_seconds * 1000)
            row = {"config": name, "window": over["window"], "beam_size": asr.cfg.get("beam_size", 1),
                   "compute_type": key[1], "threads": key[0], "group": group, "n": len(utts), "wer": jiwer.wer(refs, hyps),
                   "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95))}
            rows.append(row)
            print(f"{name:<{width}}{group:<11}{row['n']:>4}{row['wer']:>8.1%}{row['p50_ms']:>9.0f}{row['p95_ms']:>9.0f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--paddings", type=lambda s: [float(x) for x in s.split(",")], default=[2.0])
    p.add_argument("--out", default="reports/asr-window.json")
    p.add_argument("--threads", default="1", help="ASR CPU threads to compare, e.g. 1,2 (each loads its own model)")
    p.add_argument("--beams", type=lambda s: [int(x) for x in s.split(",")], default=None,
                   help="beam widths to compare, e.g. 1,3,5 (default: the profile's [asr] beam_size)")
    p.add_argument("--compute-types", type=lambda s: s.split(","), default=None,
                   help="CTranslate2 compute types to compare, e.g. int8,float32 (each loads its own model)")
    raise SystemExit(main(p.parse_args()))
