#!/usr/bin/env python
"""One engine alone, called many times with inputs of varying size: its RSS as it goes, and its call time.

    flock /tmp/team/engines.lock .venv/bin/python docs/lab/probes/probe_memory.py --engine asr|tts|embedder|llm|turn|vad
        [--calls 200] [--threads 1] [--set asr.onednn_primitive_cache=1024] [--set tts.memory_arena=true]

Tells which engine keeps memory (docs/lab/JOURNAL.md §16): ``asr`` transcribes the real recording jfk.wav cut
to a random length (0.5-8 s) with the cut window, and every fourth call with the 30 s window; ``tts``
synthesizes a random prefix of a long reply, chunked as the session chunks it; ``embedder`` embeds a random
prefix of a passage; ``llm`` streams a reply (16-96 tokens) to a question after a random prefix of a passage
through the in-process engine (its front end, tokenizer and detokenizer run in this process; the engine core's
own process is printed beside it); ``turn`` scores smart-turn on a random length of the recording; ``vad`` runs
a fresh Silero stream (as each session has) over a random length of it. ``--threads``: that many callers at
once (the server runs two TTS workers, and cpu-base two Whisper workers). ``--set stage.key=value`` overrides
the profile (true/false, numbers, strings). glibc's arenas and trim are set as ``serve`` sets them. Prints the
RSS every ``--every`` calls and the call time p50 / p90.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

REPLY = ("To replace the filter, switch off and unplug the purifier, press the two grey release tabs on the base, "
         "lift the outer shell straight up, pull the old filter out by its blue loop, lower the new one into place "
         "and refit the shell until both tabs click. The TriLayer filter costs forty-nine dollars.").split()


def rss_mib() -> int:
    from scripts.bench.probe import proc_figures

    return int(proc_figures(os.getpid())["rss_bytes"]) >> 20


def children_mib() -> str:
    """The RSS of this process's children (the vLLM engine core), when it has any."""
    from scripts.bench.probe import proc_figures

    kids = [pid for task in Path(f"/proc/{os.getpid()}/task").iterdir()
            for pid in (task / "children").read_text().split()]
    sizes = [int(proc_figures(int(pid))["rss_bytes"]) >> 20 for pid in kids]
    return f" (children {'+'.join(map(str, sizes))} MiB)" if sizes else ""


def report(times: list[float]) -> None:
    q = statistics.quantiles(times, n=10)
    print(f"end: RSS {rss_mib()} MiB{children_mib()}; call p50 {statistics.median(times):.1f} ms, p90 {q[-1]:.1f} ms "
          f"({len(times)} calls)")


def _value(raw: str) -> object:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=("asr", "tts", "embedder", "llm", "turn", "vad"), required=True)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="STAGE.KEY=VALUE")
    args = ap.parse_args()

    import numpy as np
    import soundfile as sf

    from sub250 import native_memory
    from sub250.config import Settings
    from sub250.stack import Stack
    from sub250.tts.chunker import split_long

    settings = Settings.from_env()
    native_memory.limit_arenas(settings.malloc_arena_max)
    stack = Stack.from_settings(settings)
    for item in args.set:
        key, _, raw = item.partition("=")
        stage, _, field = key.partition(".")
        stack.profile.stages.setdefault(stage, {})[field] = _value(raw)
    await stack.start((args.engine,))
    audio, _ = sf.read(Path(__file__).resolve().parents[3] / "tests" / "data" / "audio" / "jfk.wav", dtype="float32")
    print(f"{args.engine} loaded: RSS {rss_mib()} MiB{children_mib()}  (overrides: {args.set or 'none'})", flush=True)

    times: list[float] = []
    lock = threading.Lock()
    done = [0]

    def counted(t0: float) -> None:
        with lock:
            times.append((time.perf_counter() - t0) * 1000)
            done[0] += 1
            if done[0] % args.every == 0:
                native_memory.trim()
                print(f"  {done[0]:>5} calls: RSS {rss_mib()} MiB{children_mib()}", flush=True)

    if args.engine == "llm":
        from sub250.llm.base import LLMRequest

        async def talker(k: int) -> None:
            rnd = random.Random(args.seed * 100 + k)
            for i in range(args.calls // args.threads):
                passage = " ".join(REPLY[:rnd.randrange(3, len(REPLY))])
                request = LLMRequest(f"probe-{k}-{i}", [
                    {"role": "system", "content": f"Answer from this passage only: {passage}"},
                    {"role": "user", "content": "What does it say, in one sentence?"}],
                    max_tokens=rnd.randrange(16, 97))
                t0 = time.perf_counter()
                async for _ in stack.llm.stream(request):
                    pass
                counted(t0)

        await asyncio.gather(*(talker(k) for k in range(args.threads)))
        report(times)
        await stack.close()
        return 0

    def call(rnd: random.Random) -> None:
        t0 = time.perf_counter()
        if args.engine == "turn":
            stack.end_of_turn.probability(np.resize(audio, rnd.randrange(8, 250) * 512))
        elif args.engine == "vad":
            from sub250.audio.vad import WINDOW, SileroVAD

            stream = SileroVAD(stack.vad_session)
            for k in range(rnd.randrange(8, 250)):
                stream.probability(audio[k * WINDOW:(k + 1) * WINDOW] if (k + 1) * WINDOW <= audio.size
                                   else np.zeros(WINDOW, dtype=np.float32))
        elif args.engine == "asr":
            n = rnd.randrange(16, 250) * 512
            stack.asr.transcribe(np.resize(audio, n), window="30s" if rnd.random() < 0.25 else "audio")
        elif args.engine == "tts":
            for piece in split_long(" ".join(REPLY[:rnd.randrange(3, len(REPLY))])):
                for _ in stack.tts.synthesize(piece):
                    pass
        else:
            stack.embedder.embed([" ".join(REPLY[:rnd.randrange(3, len(REPLY))])])
        counted(t0)

    def worker(k: int) -> None:
        rnd = random.Random(args.seed * 100 + k)
        for _ in range(args.calls // args.threads):
            call(rnd)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report(times)
    await stack.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
