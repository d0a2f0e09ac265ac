#!/usr/bin/env python
"""Endpointing benchmark (in the spirit of LiveKit's eot-bench): when does each strategy commit the turn?

    flock /tmp/team/engines.lock .venv/bin/python scripts/bench_endpointing.py [--out reports/endpointing]
        [--pauses 150,200,250] [--thresholds 0.3,0.5,0.7,0.9] [--caps 1.5,2.0] [--seed 0] [--tail-s 2.5]

Utterances: the real recordings (tests/data/audio) and the synthesized questions (scripts/corpus, Piper), each
streamed twice, 32 ms window by window through the real Silero VAD and our Endpointer (no real time):

* **end**: the utterance, then ``--tail-s`` of silence (2.5 s by default, so that a 2 s cap always fits);
* **paused**: the same with a pause of 300-800 ms (seeded) inserted mid-utterance at a gap between words (the
  quietest 30 ms of a VAD dip at least 0.3 s / 20 % of the speech away from its start and end; failing that, the
  quietest 30 ms of its middle half; 5 ms fades either side of the cut), then the same tail.

Strategies (``app/bench/endpointing.py``): ``silence-500`` (today), ``silence-300``, and smart-turn v3.2 at
every (pause S, threshold, cap): at S of silence it scores the audio so far (from 0.5 s before speech started,
as Pipecat feeds it), commits once p >= threshold (the call's measured compute time is part of the delay),
otherwise re-scores every 96 ms of further silence, and commits anyway at the cap. ``+trim`` variants (cap 1.5 s)
score only the audio up to the last speech window, once per pause (the model sees no trailing silence); ``+once``
variants (cap 1.5 s) score once per pause, with the silence so far, as Pipecat does. ``+cue`` variants (cap
1.5 s; ``--no-cue`` leaves them out) also ask Whisper (tiny.en, the cut "audio" window the partials use) for the
transcript so far when the pause starts, and hold the turn through that pause when it ends on "and", "the",
"of", a number word, ... (``app.bench.endpointing.CONTINUATION_WORDS``); its compute time counts too.

Per strategy and speech kind: mean and p95 delay on the true ends (commit - end of the last speech window),
the share of paused streams committed inside the inserted pause (``cut@pause``), and the share of all streams
committed before their end at some other gap (``early``). Writes ``<out>.json`` and ``<out>.png`` (delay
against false cut-offs, one point per strategy).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.audio.pcm import load_audio  # noqa: E402
from app.audio.rates import ASR_RATE  # noqa: E402
from app.audio.vad import WINDOW, SileroVAD  # noqa: E402
from app.bench.corpus import real_recordings, synthesize_corpus  # noqa: E402
from app.bench.endpointing import (  # noqa: E402
    Outcome, Silence, SilenceCue, SmartTurnRule, Truth, classify, pause_point, simulate, speech_end_window, speech_heard_again_ms,
    summarize, window_end_ms,
)
from app.config import Settings  # noqa: E402
from app.session.turn_detection import EAGERNESS  # noqa: E402
from app.modelstore import prepare  # noqa: E402
from app.profiles import load_profile  # noqa: E402

PRE_SPEECH = ASR_RATE // 2  # Pipecat's pre_speech_ms = 500
FADE = ASR_RATE * 5 // 1000
TARGET_CUT, TARGET_DELAY_MS = 0.05, 300.0


def vad_probs(session: object, audio: np.ndarray, threshold: float) -> list[float]:
    vad = SileroVAD(session, threshold)
    n = -(-audio.size // WINDOW) * WINDOW
    padded = np.concatenate([audio, np.zeros(n - audio.size, dtype=np.float32)])
    return [vad.probability(padded[i : i + WINDOW]) for i in range(0, n, WINDOW)]


def with_pause(audio: np.ndarray, at: int, samples: int) -> np.ndarray:
    head, tail = audio[:at].copy(), audio[at:].copy()
    ramp = np.linspace(1.0, 0.0, FADE, dtype=np.float32)
    head[-FADE:] *= ramp[-head[-FADE:].size :]
    tail[:FADE] *= ramp[::-1][: tail[:FADE].size]
    return np.concatenate([head, np.zeros(samples, dtype=np.float32), tail])


class Transcripts:
    """Whisper's transcript of one stream so far, cached by (speech start, last speech window)."""

    def __init__(self, asr: object, stream: np.ndarray, log: list[float]) -> None:
        self.asr, self.stream, self.log = asr, stream, log
        self.cache: dict[tuple[int, int], tuple[str, float]] = {}

    def __call__(self, start: int, last_speech: int) -> tuple[str, float]:
        key = (start, last_speech)
        if key not in self.cache:
            tr = self.asr.transcribe(self.stream[max(0, start * WINDOW - PRE_SPEECH) : (last_speech + 1) * WINDOW],
                                     window="audio")
            self.log.append(tr.compute_seconds * 1000)
            self.cache[key] = (tr.text, tr.compute_seconds * 1000)
        return self.cache[key]


class Scores:
    """smart-turn scores of one stream, cached by (speech start, window): every strategy reuses them."""

    def __init__(self, engine: object, stream: np.ndarray, log: list[float]) -> None:
        self.engine, self.stream, self.log = engine, stream, log
        self.cache: dict[tuple[int, int], tuple[float, float]] = {}

    def __call__(self, start: int, window: int) -> tuple[float, float]:
        key = (start, window)
        if key not in self.cache:
            segment = self.stream[max(0, start * WINDOW - PRE_SPEECH) : (window + 1) * WINDOW]
            t0 = time.perf_counter()
            p = self.engine.probability(segment)
            ms = (time.perf_counter() - t0) * 1000
            self.log.append(ms)
            self.cache[key] = (p, ms)
        return self.cache[key]


def call_cost(engine: object, audio: np.ndarray, n: int = 50) -> dict[str, float]:
    engine.probability(audio)  # warm
    ms = []
    for _ in range(n):
        t0 = time.perf_counter()
        engine.probability(audio)
        ms.append((time.perf_counter() - t0) * 1000)
    return {"n": n, "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)),
            "mean_ms": float(np.mean(ms))}


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({r["group"] for r in rows})
    fig, axes = plt.subplots(1, len(groups), figsize=(7 * len(groups), 6), squeeze=False)
    for ax, group in zip(axes[0], groups):
        ax.fill_between([-100, TARGET_CUT * 100], 0, TARGET_DELAY_MS, color="0.9", zorder=0)
        for r in (r for r in rows if r["group"] == group):
            if r["mean_delay_ms"] is None:
                continue
            x, y = 100 * r["cut_pause_rate"], r["mean_delay_ms"]
            if r["kind"].startswith("silence"):
                ax.scatter(x, y, marker="s", s=60, color="black" if r["kind"] == "silence" else "tab:purple")
            else:
                color = {150: "tab:blue", 200: "tab:orange", 250: "tab:green"}.get(r["pause_ms"], "tab:red")
                marker = ("*" if r["kind"].endswith("+cue") else "D" if r["kind"].endswith("+trim")
                          else "P" if r["kind"].endswith("+once") else "o" if r["cap_ms"] < 2000 else "^")
                ax.scatter(x, y, marker=marker, s=70 if marker == "*" else 40, color=color)
            ax.annotate(r["label"], (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
        n = next(r["n_end"] for r in rows if r["group"] == group)
        ax.set_title(f"{group} speech ({n} utterances, each ending normally and with an inserted pause)", fontsize=9)
        ax.set_xlim(left=-2)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("false cut-offs on inserted mid-utterance pauses (%)")
        ax.set_ylabel("mean endpoint delay on true ends (ms)")
        ax.grid(alpha=0.3)
    fig.suptitle("Endpointing: silence rules (black squares; +cue purple) vs smart-turn v3.2 (first score at "
                 "150/200/250 ms blue/orange/green;\ncap 1.5 s circles, 2 s triangles, +once plus signs, +trim "
                 "diamonds, +cue stars); target: grey corner", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(args: argparse.Namespace) -> int:
    from app.asr.whisper import WhisperASR
    from app.audio.smart_turn import SmartTurn

    settings = Settings.from_env()
    profile = load_profile(settings.profile)
    models = prepare(profile, settings.models_dir, stages=("vad", "turn") + (() if args.no_cue else ("asr",)))
    threshold = float(profile.stage("vad").get("threshold", 0.5))
    vad = SileroVAD.load_session(models["vad"]["model"], threads=1)
    engine = SmartTurn(models["turn"]["model"], dict(profile.stage("turn"), intra_op_threads=args.threads))
    engine.load()
    asr = None
    if not args.no_cue:
        asr = WhisperASR(models["asr"]["model"], dict(profile.stage("asr"), cpu_threads=1, full_window_cpu_threads=1))
        asr.load()

    strategies: list = [Silence(500), Silence(300)]
    strategies += [SmartTurnRule(s, t, int(c * 1000)) for s in args.pauses for c in args.caps for t in args.thresholds]
    strategies += [SmartTurnRule(s, t, 1500, once=True) for s in args.pauses for t in args.thresholds]
    strategies += [SmartTurnRule(s, t, 1500, trim=True) for s in args.pauses for t in args.thresholds]
    # semantic_vad as the session runs it (app/session/turn_detection.py): asked once a pause, then the cap
    shipped = {e: SmartTurnRule(t.ask_after_ms, t.threshold, t.cap_ms, once=True) for e, t in EAGERNESS.items()}
    strategies += [s for s in dict.fromkeys(shipped.values()) if s not in strategies]
    if not args.no_cue:
        strategies += [SilenceCue(300, 1500)]
        strategies += [SmartTurnRule(s, t, 1500, cue=True) for s in args.pauses for t in args.thresholds]
    utts = real_recordings() + synthesize_corpus(settings.home / "corpus")
    rng = np.random.default_rng(args.seed)
    tail = np.zeros(int(args.tail_s * ASR_RATE), dtype=np.float32)
    compute_log: list[float] = []
    asr_log: list[float] = []
    streams = []
    t_start = time.perf_counter()
    for u in utts:
        audio = load_audio(str(u.path))
        at, how = pause_point(audio, vad_probs(vad, audio, threshold), threshold=threshold)
        pause = int(rng.uniform(0.3, 0.8) * ASR_RATE)
        for variant, stream in (("end", np.concatenate([audio, tail])),
                                ("paused", np.concatenate([with_pause(audio, at, pause), tail]))):
            probs = vad_probs(vad, stream, threshold)
            end = window_end_ms(speech_end_window(probs, threshold))
            truth = Truth(end, (at / ASR_RATE * 1000, speech_heard_again_ms(probs, at + pause, threshold=threshold))
                          if variant == "paused" else None)
            scores = Scores(engine, stream, compute_log)
            texts = Transcripts(asr, stream, asr_log) if asr is not None else None
            commits = {s.name: simulate(s, probs, scores, texts, threshold=threshold) for s in strategies}
            outcomes = {name: classify(c, truth) for name, c in commits.items()}
            streams.append({
                "id": u.id, "group": u.kind, "variant": variant, "seconds": round(stream.size / ASR_RATE, 3),
                "speech_end_ms": end, "pause": truth.pause, "pause_ms": round(pause / ASR_RATE * 1000) if variant == "paused" else None,
                "pause_found_by": how if variant == "paused" else None,
                "scores": sorted([w, round(p, 4)] for (_, w), (p, _) in scores.cache.items()),
                "transcripts": sorted([w, t] for (_, w), (t, _) in texts.cache.items()) if texts else [],
                "outcomes": {n: {"kind": o.kind, "delay_ms": o.delay_ms,
                                 "by": commits[n].by if commits[n] else None} for n, o in outcomes.items()},
            })
        print(f"  {u.kind:<9} {u.id:<12} pause {pause / 16:4.0f} ms at {at / ASR_RATE:5.2f} s ({how}); "
              f"{len(compute_log)} smart-turn calls so far", flush=True)
    run_s = time.perf_counter() - t_start

    rows = []
    for s in strategies:
        for group in ("real", "synthetic"):
            mine = [x for x in streams if x["group"] == group]
            outs = {v: [Outcome(x["outcomes"][s.name]["kind"], x["outcomes"][s.name]["delay_ms"])
                        for x in mine if x["variant"] == v] for v in ("end", "paused")}
            row = {"strategy": s.name, "group": group, **summarize(outs["end"], outs["paused"])}
            if isinstance(s, Silence):
                row.update(kind="silence", label=s.name)
            elif isinstance(s, SilenceCue):
                row.update(kind="silence+cue", label=f"{s.silence_ms}+cue", cap_ms=s.cap_ms)
            else:
                extra = s.extra
                row.update(kind="smart-turn" + extra, pause_ms=s.pause_ms, threshold=s.threshold,
                           cap_ms=s.cap_ms, pause_windows_ms=round(s.pause_ms / 32) * 32,
                           label=f"{s.pause_ms}/{s.threshold:g}/{s.cap_ms / 1000:g}{extra}")
            row["meets_target"] = bool(row["mean_delay_ms"] is not None and row["mean_delay_ms"] <= TARGET_DELAY_MS
                                       and row["cut_pause_rate"] is not None and row["cut_pause_rate"] <= TARGET_CUT)
            rows.append(row)

    cost = call_cost(engine, load_audio(str(next(u.path for u in utts if u.id == "jfk"))))
    print(f"\nsmart-turn per call, {args.threads} thread: p50 {cost['p50_ms']:.1f} ms, p95 {cost['p95_ms']:.1f} ms "
          f"(50 calls on jfk.wav); in the run: {len(compute_log)} calls, p50 {np.percentile(compute_log, 50):.1f}, "
          f"p95 {np.percentile(compute_log, 95):.1f} ms; run {run_s:.0f} s")
    if asr_log:
        print(f"whisper transcript for the cue: {len(asr_log)} calls, p50 {np.percentile(asr_log, 50):.1f}, "
              f"p95 {np.percentile(asr_log, 95):.1f} ms")
    n_real = sum(1 for x in streams if x["group"] == "real") // 2
    n_syn = sum(1 for x in streams if x["group"] == "synthetic") // 2
    print(f"utterances: {n_real} real, {n_syn} synthetic (each: end + paused)\n")
    head = f"{'strategy':<44}{'speech':<11}{'mean ms':>8}{'p95 ms':>8}{'cut@pause':>10}{'early':>7}{'missed':>7}  target"
    print(head)
    print("-" * len(head))
    fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    for r in rows:
        print(f"{r['strategy']:<44}{r['group']:<11}{fmt(r['mean_delay_ms'], '8.0f'):>8}{fmt(r['p95_delay_ms'], '8.0f'):>8}"
              f"{fmt(r['cut_pause_rate'], '.1%'):>10}{fmt(r['early_rate'], '.1%'):>7}{r['missed']:>7}  "
              f"{'yes' if r['meets_target'] else ''}")

    print("\nsemantic_vad as shipped (app/session/turn_detection.py EAGERNESS):")
    for eagerness, rule in shipped.items():
        for r in (r for r in rows if r["strategy"] == rule.name):
            print(f"  eagerness={eagerness:<7}{r['group']:<11}mean {fmt(r['mean_delay_ms'], '.0f')} ms, "
                  f"p95 {fmt(r['p95_delay_ms'], '.0f')} ms, cut@pause {fmt(r['cut_pause_rate'], '.1%')}")

    out_json, out_png = Path(args.out + ".json"), Path(args.out + ".png")
    out_json.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "command": " ".join(sys.argv), "seed": args.seed, "tail_s": args.tail_s, "vad_threshold": threshold,
        "target": {"cut_pause_rate_max": TARGET_CUT, "mean_delay_ms_max": TARGET_DELAY_MS},
        "smart_turn": {"model": str(models["turn"]["model"]), "threads": args.threads, "cost_50_calls": cost,
                       "run_calls": len(compute_log), "run_p50_ms": float(np.percentile(compute_log, 50)),
                       "run_p95_ms": float(np.percentile(compute_log, 95))},
        "cue_asr": ({"calls": len(asr_log), "p50_ms": float(np.percentile(asr_log, 50)),
                     "p95_ms": float(np.percentile(asr_log, 95))} if asr_log else None),
        "rows": rows, "streams": streams,
        "semantic_vad": {e: rule.name for e, rule in shipped.items()},
    }
    out_json.write_text(json.dumps(result, indent=1) + "\n")
    plot(rows, out_png)
    print(f"\nwrote {out_json} and {out_png}")
    return 0


if __name__ == "__main__":
    floats = lambda s: [float(x) for x in s.split(",")]  # noqa: E731
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="reports/endpointing", help="path prefix: writes <out>.json and <out>.png")
    p.add_argument("--pauses", type=lambda s: [int(x) for x in s.split(",")], default=[150, 200, 250],
                   help="ms of silence before smart-turn first scores")
    p.add_argument("--thresholds", type=floats, default=[0.3, 0.5, 0.7, 0.9])
    p.add_argument("--caps", type=floats, default=[1.5, 2.0], help="s of silence that commit anyway")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tail-s", type=float, default=2.5, help="silence after each utterance (s)")
    p.add_argument("--threads", type=int, default=1, help="smart-turn onnxruntime threads")
    p.add_argument("--no-cue", action="store_true", help="leave out the transcript-cue variants (no Whisper)")
    raise SystemExit(main(p.parse_args()))
