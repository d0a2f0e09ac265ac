#!/usr/bin/env python
"""Interruption benchmark: sounds over a live reply, with the interruption check on and off, interleaved.

    .venv/bin/python scripts/bench_interruptions.py [--url ws://127.0.0.1:8250/v1/realtime] [--key KEY]
        [--reps 3] [--out reports/interruptions] [--against ws://127.0.0.1:8252/v1/realtime] [--fresh-sounds]

For each sound, ``--reps`` times, one trial with the check on and one with it off
(``session.sub250.interruption_check``), alternating, against one running server. A trial (see
``scripts/bench/interruptions.py``): a fresh session asks a question (typed: spoken, a Piper rendering Whisper misheard
got a one-sentence reply, over before the sound - every trial of that rep void) that gets a long generated reply;
at the reply's first audio the sound is streamed at real-time pace, then silence. Sounds: a synthesized wordless
hum (``scripts/bench/sounds.py``), "Uh-huh.", "Mm-hmm.", "Yeah." (backchannels, spoken by the Piper voice), and real
words: "Wait, stop. I have another question about my order." and "Stop." (Piper), and the first 2.2 s of the real
JFK recording in tests/data/audio ("And so my fellow Americans"). Per sound and setting: the share of valid trials
whose reply was cancelled, and the delay from the sound's first speech to the cancelled ``response.done``. Prints a
table; writes ``<out>.json`` and ``<out>.png``. Loopback servers only.

``--against URL``: compare two servers (two profiles) instead of the check on and off: each trial of a rep runs
on both, check on, in alternating order, with the same sounds; rows are labelled by each server's profile (its
``/healthz``). ``--fresh-sounds``: the Piper sounds are synthesized afresh for every rep (Piper samples, so each
rep hears another rendering of "Uh-huh.", the same on both settings), not once for the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench.interruptions import Trial, run_trial, summarize  # noqa: E402
from scripts.bench.options import add_server_options, default_key  # noqa: E402
from scripts.bench.probe import http_base, require_loopback  # noqa: E402
from scripts.bench.sounds import hum  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
INSTRUCTIONS = ("You are the voice support agent of Halden Labs. Answer the caller's question from the facts in "
                "the context.")
QUESTION = "Can you tell me everything about how the warranty works and what it covers?"
SPOKEN = {"uh-huh": "Uh-huh.", "mm-hmm": "Mm-hmm.", "yeah": "Yeah.",
          "wait-stop": "Wait, stop. I have another question about my order.", "stop": "Stop."}
WORDS = ("wait-stop", "stop", "jfk")  # the sounds that should cancel the reply


def sounds(tts) -> dict[str, bytes]:
    import numpy as np
    import soundfile as sf
    import soxr

    def pcm24(x, rate):
        return (np.clip(soxr.resample(x, rate, 24000), -1, 1) * 32767).astype("<i2").tobytes()

    def say(text):
        chunks = list(tts.synthesize(text))
        x = np.frombuffer(b"".join(c.pcm16 for c in chunks), dtype="<i2").astype(np.float32) / 32768
        return pcm24(x, chunks[0].sample_rate)

    out = {"hum": hum()}
    out.update({name: say(text) for name, text in SPOKEN.items()})
    jfk, rate = sf.read(ROOT / "tests/data/audio/jfk.wav", dtype="float32")
    out["jfk"] = pcm24(jfk[: int(2.2 * rate)], rate)
    return out


def plot(rows: list[dict], path: Path) -> None:
    from scripts.bench.report import _plt, _save

    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4))
    names = list(dict.fromkeys(r["sound"] for r in rows))
    settings = list(dict.fromkeys((r["server"], r["check"]) for r in rows))
    for offset, (server, check) in zip((-0.2, 0.2), settings):
        vals = [next((r["cancelled_share"] or 0) * 100 for r in rows
                     if r["sound"] == n and (r["server"], r["check"]) == (server, check)) for n in names]
        label = "check on" if check else "check off (any speech cancels)"
        ax.bar([i + offset for i in range(len(names))], vals, width=0.4,
               label=f"{server}: {label}" if server else label)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("replies cancelled (%)")
    ax.set_title("Sounds over a live reply (words should cancel, the rest should not)")
    ax.legend()
    _save(fig, path)


async def profile_of(url: str) -> str:
    """The profile a server runs (its ``/healthz``), to label its rows."""
    import aiohttp

    async with aiohttp.ClientSession() as http, http.get(http_base(url) + "/healthz") as resp:
        body = await resp.json(content_type=None)
    return str(body.get("profile") or url)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_options(ap, pid_help="unused")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="reports/interruptions")
    ap.add_argument("--against", help="a second server's realtime URL: compare the two, check on (see above)")
    ap.add_argument("--fresh-sounds", action="store_true", help="synthesize the Piper sounds afresh every rep")
    args = ap.parse_args()
    require_loopback(args.url)
    if args.against:
        require_loopback(args.against)
    if not 1 <= args.reps <= 20:
        raise SystemExit("--reps must be 1-20")
    key = None if args.no_key else (args.key or default_key())
    # (url, server label, check): the two settings each trial runs in, in this order on even reps
    if args.against:
        settings = [(url, await profile_of(url), True) for url in (args.url, args.against)]
    else:
        settings = [(args.url, "", True), (args.url, "", False)]
    from scripts.bench.corpus import _load_tts

    tts = _load_tts()
    made = sounds(tts)
    trials: list[Trial] = []
    for rep in range(args.reps):
        if args.fresh_sounds and rep:
            made = sounds(tts)
        for name, sound in made.items():
            for url, server, check in (settings if rep % 2 == 0 else settings[::-1]):
                try:
                    trial = await run_trial(url, key, QUESTION, name, sound, check=check,
                                            instructions=INSTRUCTIONS, server=server)
                except Exception as exc:  # a failed trial is reported, not hidden
                    trial = Trial(name, check, "error", detail=f"{type(exc).__name__}: {exc}", server=server)
                trials.append(trial)
                delay = f"{trial.onset_to_done_ms:.0f} ms" if trial.onset_to_done_ms is not None else ""
                print(f"rep {rep + 1} {name:10s} {server + ' ' if server else ''}check={'on ' if check else 'off'} "
                      f"{trial.outcome:9s} {delay} {trial.detail}", flush=True)
    rows = summarize(trials)
    width = max([len(r["server"]) for r in rows] + [6])
    print(f"\n{'sound':10s} {'server':{width}s} {'check':5s} {'valid':>5s} {'cancelled':>9s} "
          f"{'onset->done p50 / max (ms)':>28s}")
    for r in rows:
        share = f"{r['cancelled']}/{r['valid']}"
        p50, mx = r["onset_to_done_p50_ms"], r["onset_to_done_max_ms"]
        lat = f"{p50:.0f} / {mx:.0f}" if p50 is not None else "-"
        print(f"{r['sound']:10s} {r['server'] or '-':{width}s} {'on' if r['check'] else 'off':5s} {r['valid']:5d} "
              f"{share:>9s} {lat:>28s}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"rows": rows, "trials": [asdict(t) for t in trials],
                                                    "words": list(WORDS)}, indent=2))
    plot(rows, out.with_suffix(".png"))
    print(f"\nwrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")
    return 1 if any(t.outcome == "error" for t in trials) else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
