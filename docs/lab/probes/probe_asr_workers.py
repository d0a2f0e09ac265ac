#!/usr/bin/env python
"""Two transcriptions at once on the default profile's Whisper: with one worker they run in turn, with two side
by side (``[asr] workers``). Prints, per worker count and round, one call alone and two at once (a partial and a
final, as ``recognize`` schedules them), and the RSS.

    flock /tmp/team/engines.lock .venv/bin/python docs/lab/probes/probe_asr_workers.py
        [--workers 1,2] [--rounds 3] [--seconds 4]

The audio is the first ``--seconds`` of tests/data/audio/jfk.wav (the cut window, as partials and finals use).
Each worker count runs in a process of its own, so the RSS figures compare.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))


def rss_mib() -> int:
    from scripts.bench.probe import proc_figures

    return int(proc_figures(os.getpid())["rss_bytes"]) >> 20


async def probe(workers: int, rounds: int, audio) -> None:
    from sub250.asr.base import Need
    from sub250.config import Settings
    from sub250.stack import Stack

    stack = Stack.from_settings(Settings.from_env())
    stack.profile.stages.setdefault("asr", {})["workers"] = workers
    await stack.start(("asr",))
    print(f"workers={workers}: loaded, RSS {rss_mib()} MiB", flush=True)
    for k in range(1, rounds + 1):
        t0 = time.perf_counter()
        await stack.asr.recognize(audio)
        alone = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        await asyncio.gather(stack.asr.recognize(audio, need=Need.PARTIAL), stack.asr.recognize(audio))
        both = (time.perf_counter() - t0) * 1000
        print(f"workers={workers} round {k}: one call {alone:.0f} ms, two at once {both:.0f} ms, RSS {rss_mib()} MiB",
              flush=True)
    await stack.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts, each in a fresh engine")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    if len(counts) > 1:  # one process per count: an engine closed in this one would still hold its memory
        import subprocess

        for workers in counts:
            subprocess.run([sys.executable, __file__, "--workers", str(workers), "--rounds", str(args.rounds),
                            "--seconds", str(args.seconds)], check=True)
        return 0
    import soundfile as sf

    audio, _ = sf.read(REPO / "tests" / "data" / "audio" / "jfk.wav", dtype="float32")
    asyncio.run(probe(counts[0], args.rounds, audio[: int(16000 * args.seconds)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
