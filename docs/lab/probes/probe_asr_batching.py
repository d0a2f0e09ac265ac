#!/usr/bin/env python
"""Concurrent finals batched, or not: what the default profile's Whisper does with K finals that arrive at once
(#12 item 5: several callers commit together).

Ran against ``[asr] max_batch`` (ASREngine.batch_key / transcribe_batch), which was removed after this probe's
result (docs/lab/JOURNAL.md §35: batching finished no sooner than two workers); kept as the record of how that
figure was made, it no longer runs on the current code.

    .venv/bin/python docs/lab/probes/probe_asr_batching.py [--concurrent 2,4] [--rounds 5] [--workers W]
        [--cpu-threads T] [--out reports/asr-batching.json]

Four ways of serving K cut-window finals (two beams, as the profile's finals) that arrive at the same moment,
on the profile's engine (``[asr] workers``, one thread each):

* ``workers``: each final its own call, ``workers`` at once (``ASREngine.recognize`` with ``max_batch = 1``);
* ``engine``: ``ASREngine.recognize`` with the profile's ``[asr] max_batch`` (at least 2 here): the first
  finals take the free workers alone, a worker that frees takes the waiting ones together;
* ``batched``: all K in one call (one encoder pass, one batched decode), on one worker;
* ``split``: the K finals split over the workers, each worker one batched call.

Each round draws K questions of the replay corpus (scripts/corpus: 2-5 s utterances) and runs the four ways
one after the other, in an order that rotates each round. Per way: the wait of every final (arrival to its
transcript: what the caller waits) as p50 / max over all rounds, the time until the last one is done, and the
WER of what they heard (padding to the longest utterance changes each one's window).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from sub250.asr.base import Need  # noqa: E402
from sub250.audio.pcm import load_audio  # noqa: E402
from scripts.bench.corpus import synthesize_corpus  # noqa: E402
from sub250.config import Settings  # noqa: E402
from sub250.stack import Stack  # noqa: E402

WAYS = ("workers", "engine", "batched", "split")


async def serve(way: str, asr, audios: list[np.ndarray], batch: int) -> tuple[list[float], list[str]]:
    """Each final's wait (s) and text, all K arriving now."""
    t0 = time.perf_counter()
    if way in ("workers", "engine"):
        asr.max_batch = 1 if way == "workers" else max(batch, 2)

        async def one(a: np.ndarray) -> tuple[float, str]:
            tr = await asr.recognize(a, window="audio", need=Need.FINAL)
            return time.perf_counter() - t0, tr.text
        done = await asyncio.gather(*(one(a) for a in audios))
        return [d[0] for d in done], [d[1] for d in done]
    n = len(audios)
    groups = [list(range(n))] if way == "batched" else [list(range(n))[w::asr.workers] for w in range(asr.workers)]
    groups = [g for g in groups if g]
    key = asr.batch_key(audios[0], window="audio", prompt="")

    async def one_call(group: list[int]) -> list[tuple[int, float, str]]:
        out = await asr.run(asr.transcribe_batch, [audios[i] for i in group], key)
        return [(i, time.perf_counter() - t0, tr.text) for i, tr in zip(group, out)]
    done = sorted(item for g in await asyncio.gather(*(one_call(g) for g in groups)) for item in g)
    return [d[1] for d in done], [d[2] for d in done]


async def probe(args: argparse.Namespace) -> dict:
    import jiwer
    from transformers.models.whisper.english_normalizer import EnglishTextNormalizer

    norm = EnglishTextNormalizer({})
    settings = Settings.from_env()
    corpus = synthesize_corpus(settings.home / "corpus")
    audio = {u.id: load_audio(str(u.path)) for u in corpus}
    stack = Stack.from_settings(settings)
    asr_stage = stack.profile.stages.setdefault("asr", {})
    for option in ("workers", "cpu_threads"):
        if getattr(args, option) is not None:
            asr_stage[option] = getattr(args, option)
    await stack.start(("asr",))
    asr = stack.asr
    batch = asr.max_batch
    print(f"{asr.describe()}", flush=True)
    rng = random.Random(args.seed)
    results: dict = {}
    for k in args.concurrent:
        figures = {way: {"waits": [], "last": [], "refs": [], "hyps": []} for way in WAYS}
        for r in range(args.rounds):
            picked = rng.sample(corpus, k)
            audios = [audio[u.id] for u in picked]
            for way in WAYS[r % len(WAYS):] + WAYS[:r % len(WAYS)]:
                waits, texts = await serve(way, asr, audios, batch)
                f = figures[way]
                f["waits"] += waits
                f["last"].append(max(waits))
                f["refs"] += [norm(u.reference or "") for u in picked]
                f["hyps"] += [norm(t) for t in texts]
        print(f"\n{k} finals at once, {args.rounds} rounds ({k * args.rounds} finals a way)")
        print(f"{'way':<10}{'wait p50 ms':>12}{'wait max ms':>12}{'last p50 ms':>12}{'WER':>8}")
        results[k] = {}
        for way in WAYS:
            f = figures[way]
            row = {"wait_p50_ms": float(np.percentile(f["waits"], 50) * 1000),
                   "wait_max_ms": float(max(f["waits"]) * 1000),
                   "last_p50_ms": float(np.percentile(f["last"], 50) * 1000),
                   "wer": jiwer.wer(f["refs"], f["hyps"]), "n": len(f["waits"])}
            results[k][way] = row
            print(f"{way:<10}{row['wait_p50_ms']:>12.0f}{row['wait_max_ms']:>12.0f}{row['last_p50_ms']:>12.0f}"
                  f"{row['wer']:>8.1%}")
    await stack.close()
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrent", type=lambda s: [int(x) for x in s.split(",")], default=[2, 4])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, help="[asr] workers (default: the profile's)")
    ap.add_argument("--cpu-threads", type=int, help="[asr] cpu_threads, each worker's (default: the profile's)")
    ap.add_argument("--out", default="reports/asr-batching.json")
    args = ap.parse_args()
    results = asyncio.run(probe(args))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
