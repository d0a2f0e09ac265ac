#!/usr/bin/env python
"""Per-engine figures on this machine: load time, p50/p95 of one call, memory.

    .venv/bin/python scripts/bench_engines.py [--runs 20] [--out reports/engines.json] [--stages llm,asr]

Each engine is loaded on its own (in the order of ``sub250 doctor``), its memory is the growth of this
process's RSS plus its children's (vLLM runs in child processes), then its probe call (the same as
doctor's) runs ``--runs`` times after one warm-up. Prints a Markdown table and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sub250.config import Settings  # noqa: E402
from sub250.doctor import ORDER, PROBES, describe, rss_mb  # noqa: E402
from sub250.stack import Stack  # noqa: E402

WHAT = {
    "db": "pgvector HNSW top-3 query",
    "vad": "Silero VAD, one 32 ms window",
    "embedder": "MiniLM int8, one query",
    "tts": "Piper, first sentence (3.3 s of audio)",
    "asr": "Whisper tiny.en int8, 3.4 s utterance",
    "llm": "vLLM TTFT, short chat prompt",
}


async def main(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    stack = Stack.from_settings(settings)
    results: list[dict] = []
    try:
        for stage in [s for s in ORDER if s in args.stages.split(",")]:
            print(f"{stage}: loading…", file=sys.stderr, flush=True)
            mem0 = rss_mb()
            t0 = time.perf_counter()
            await stack.start((stage,))
            load_s = time.perf_counter() - t0
            mem = rss_mb() - mem0
            await PROBES[stage](stack)  # warm-up
            ms, extras = [], []
            runs = args.llm_runs if stage == "llm" else args.runs
            for _ in range(runs):
                r = await PROBES[stage](stack)
                ms.append(r.ms)
                extras.append(r.extra)
            row = {
                "stage": stage,
                "what": WHAT[stage],
                "engine": describe(stack, stage),
                "load_s": round(load_s, 2),
                "p50_ms": round(float(np.percentile(ms, 50)), 1),
                "p95_ms": round(float(np.percentile(ms, 95)), 1),
                "runs": runs,
                "memory_mb": round(mem),
                "samples_ms": [round(x, 2) for x in ms],
            }
            for key in sorted({k for e in extras for k in e}):
                vals = [e[key] for e in extras if key in e]
                row[f"{key}_p50"] = round(float(np.percentile(vals, 50)), 3)
            results.append(row)
    finally:
        await stack.close()

    print("| stage | call | engine | load s | p50 ms | p95 ms | memory MB | notes |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        notes = ""
        if r["stage"] == "llm":
            notes = f"decode {r.get('tokens_per_s_p50', 0):.0f} tok/s p50"
            if "spec_acceptance_p50" in r:
                notes += f", n-gram acceptance {r['spec_acceptance_p50']:.0%} p50"
        print(f"| {r['stage']} | {r['what']} | {r['engine']} | {r['load_s']:.1f} | {r['p50_ms']:.1f} | "
              f"{r['p95_ms']:.1f} | {r['memory_mb']} | {notes} |")
    report = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "profile": stack.profile.name,
        "enforce_eager": settings.llm_enforce_eager or "profile default",
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "results": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--llm-runs", type=int, default=10)
    p.add_argument("--out", default="reports/engines.json")
    p.add_argument("--stages", default=",".join(ORDER), help="comma-separated subset of " + ",".join(ORDER))
    raise SystemExit(asyncio.run(main(p.parse_args())))
