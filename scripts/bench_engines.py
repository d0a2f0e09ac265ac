#!/usr/bin/env python
"""Per-engine figures on this machine: load time, p50/p95 of one call, memory.

    .venv/bin/python scripts/bench_engines.py [--runs 20] [--out reports/engines.json] [--stages llm,asr]

Each engine is loaded on its own (in the order of ``sub250 doctor``), its memory is the growth of this
process's RSS plus its children's (vLLM runs in child processes), then its probe call (the same as
doctor's) runs ``--runs`` times after one warm-up. ``turn_model`` (after the embedder, whose MiniLM session it
shares) is our end-of-turn model (app/turn_model) on whatever profile: one call scores one cut of a replay
question (or the whole), the cuts taken in turn (``--turn-runs`` calls). Prints a Markdown
table and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sub250.config import Settings  # noqa: E402
from sub250.doctor import ORDER, PROBES, ProbeResult, describe, rss_mb  # noqa: E402
from sub250.stack import Stack  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

WHAT = {
    "db": "pgvector HNSW top-3 query",
    "vad": "Silero VAD, one 32 ms window",
    "embedder": "MiniLM int8, one query",
    "tts": "Piper, first sentence (3.3 s of audio)",
    "asr": "Whisper tiny.en int8, 3.4 s utterance",
    "llm": "vLLM TTFT, short chat prompt",
    "turn_model": "end-of-turn model, one pause's words",
}
STAGES = ORDER + ("turn_model",)


def turn_model_probe(stack: Stack):
    """The probe of ``turn_model``: the end-of-turn model over the started embedder, each call one word-boundary
    cut (or the whole) of the next question of scripts/corpus/questions.json."""
    from sub250.turn_model.model import TurnModel

    model = stack.turn_model or TurnModel(stack.embedder, stack.models["embedder"]["tokenizer"])
    if model.dense_w is None:
        model.load()
    questions = [q["text"] for q in json.loads((REPO / "scripts/corpus/questions.json").read_text())]
    texts = itertools.cycle([" ".join(q.split()[:n]) for q in questions for n in range(1, len(q.split()) + 1)])

    async def probe(_: Stack) -> ProbeResult:
        text = next(texts)
        t0 = time.perf_counter()
        logprob = await model.done_logprob(text)
        ms = (time.perf_counter() - t0) * 1000
        return ProbeResult(ms, f"P(done | {text!r}) = {np.exp(logprob):.2f}", {"words": float(len(text.split()))})

    return probe


async def main(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    stack = Stack.from_settings(settings)
    results: list[dict] = []
    try:
        wanted = args.stages.split(",")
        unknown = sorted(set(wanted) - set(STAGES))
        if unknown:
            raise SystemExit(f"bench_engines: no stage {', '.join(unknown)} (stages: {', '.join(STAGES)})")
        for stage in [s for s in STAGES if s in wanted]:
            print(f"{stage}: loading…", file=sys.stderr, flush=True)
            mem0 = rss_mb()
            t0 = time.perf_counter()
            if stage == "turn_model":
                if stack.embedder is None:
                    await stack.start(("embedder",))
                probe = await asyncio.to_thread(turn_model_probe, stack)
            else:
                await stack.start((stage,))
                probe = PROBES[stage]
            load_s = time.perf_counter() - t0
            mem = rss_mb() - mem0
            await probe(stack)  # warm-up
            ms, extras = [], []
            runs = {"llm": args.llm_runs, "turn_model": args.turn_runs}.get(stage, args.runs)
            for _ in range(runs):
                r = await probe(stack)
                ms.append(r.ms)
                extras.append(r.extra)
            row = {
                "stage": stage,
                "what": WHAT[stage],
                "engine": "logistic head on MiniLM int8 (app/turn_model)" if stage == "turn_model"
                else describe(stack, stage),
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
    p.add_argument("--turn-runs", type=int, default=200, help="calls of the end-of-turn model")
    p.add_argument("--out", default="reports/engines.json")
    p.add_argument("--stages", default=",".join(STAGES), help="comma-separated subset of " + ",".join(STAGES))
    raise SystemExit(asyncio.run(main(p.parse_args())))
