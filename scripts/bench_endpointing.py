#!/usr/bin/env python
"""Endpointing benchmark (in the spirit of LiveKit's eot-bench): when does each strategy commit the turn?

    .venv/bin/python scripts/bench_endpointing.py [--out reports/endpointing] [--placement words|gap]
        [--pauses 150,200,250] [--thresholds 0.3,0.5,0.7,0.9] [--caps 1.5,2.0] [--fallbacks 500,700]
        [--seed 0] [--tail-s 2.5]

Utterances: the real recordings (tests/data/audio) and the synthesized questions (scripts/corpus, Piper),
streamed 32 ms window by window through the real Silero VAD and our Endpointer (no real time):

* **end**: the utterance, then ``--tail-s`` of silence (2.5 s by default, so that a 2 s cap always fits);
* **paused**: the same with a pause of 300-800 ms (seeded) inserted mid-utterance, then the same tail (5 ms fades
  either side of the cut). ``--placement words`` (the default): one paused stream per place **between two words**
  (Whisper's word timings on the whole utterance, the profile's model; the quietest 10 ms near the words' meeting
  point), each labelled ``open`` (the words before it end on "the", "and", "of", a number word...: where a speaker
  hesitates) or ``other`` (after any other word: among them prefixes that are whole questions by themselves).
  ``--placement gap`` (docs/BENCHMARKS.md §14): one paused stream per utterance, at the quietest 30 ms of a VAD dip
  at least 0.3 s / 20 % of the speech away from its start and end, failing that of its middle half (on Piper's
  speech that is often inside a word).

Strategies (``scripts/bench/endpointing.py``): ``silence-500`` (today), ``silence-300``, and smart-turn v3.2 at
every (pause S, threshold, cap): at S of silence it scores the audio so far (from 0.5 s before speech started,
as Pipecat feeds it), commits once p >= threshold (the call's measured compute time is part of the delay),
otherwise re-scores every 96 ms of further silence, and commits anyway at the cap. ``+trim`` variants (cap 1.5 s)
score only the audio up to the last speech window, once per pause (the model sees no trailing silence); ``+once``
variants (cap 1.5 s) score once per pause, with the silence so far, as Pipecat does. ``+cue`` variants (cap
1.5 s; ``--no-cue`` leaves them out) also ask Whisper (the profile's model, the cut "audio" window the partials
use) for the transcript so far when the pause starts, and hold the turn through that pause when it ends on "and",
"the", "of", a number word, ... (``sub250.session.turn_cue.CONTINUATION_WORDS``, the session's own test); its
compute time counts too. ``+cue@64`` variants ask for it at 64 ms of silence instead (``[vad]
speculate_after_ms``: the reply the session holds at the pause transcribes then), and ``silence-500+cue@64 cap
Ns`` is ``server_vad`` with ``[vad] hold_open_ms = N s`` as the session runs it (``--holds``).
``--words``: also the served LLM's reading of the words (``words@64 lp>=T at C cap Ns``: the transcript at 64 ms
of silence, then ``LLMEngine.turn_end_logprob`` on it; a finished turn, log P(end) >= T, commits at C ms of
silence, any other pause at the cap; ``--word-thresholds``, ``--word-commits``, ``--word-caps``; ``--word-unfinished
U`` adds rules where unfinished words that do not end open end at U ms, ``else U``). It starts the
profile's LLM engine in this process (vLLM: a minute or more).
``+once+cue+thenF`` variants (``--fallbacks``) are the tiered rule: smart-turn once a pause and the cue; a pause
the cue holds ends at the cap, one the model calls complete ends when both have answered, any other after F ms
of silence.

Per strategy and speech kind: mean and p95 delay on the true ends (commit - end of the last speech window),
the share of paused streams committed inside the inserted pause (``cut@pause``; with ``--placement words`` also
over the ``open`` and ``other`` places alone), and the share of all streams committed before their end at some
other gap (``early``). Writes ``<out>.json`` and ``<out>.png`` (delay against false cut-offs, one point per
strategy).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sub250.audio.pcm import load_audio  # noqa: E402
from sub250.audio.rates import ASR_RATE  # noqa: E402
from sub250.audio.vad import WINDOW, SileroVAD  # noqa: E402
from scripts.bench.corpus import real_recordings, synthesize_corpus  # noqa: E402
from scripts.bench.endpointing import (  # noqa: E402
    Outcome, Silence, SilenceCue, SmartTurnRule, Truth, Word, WordsRule, classify, pause_point, simulate, speech_end_window,
    speech_heard_again_ms, summarize, window_end_ms, word_boundaries,
)
from sub250.config import Settings  # noqa: E402
from sub250.session.turn_cue import as_said  # noqa: E402
from sub250.session.turn_detection import EAGERNESS  # noqa: E402
from sub250.modelstore import prepare  # noqa: E402
from sub250.profiles import load_profile  # noqa: E402

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


class LLMJudge:
    """The profile's LLM engine, started in a thread of its own (its event loop), judging words; each text once."""

    def __init__(self, profile: object, models: dict, settings: Settings) -> None:
        import asyncio
        import threading

        from sub250.llm import create_engine

        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True, name="llm-judge").start()
        self.engine = create_engine(profile.stage("llm"), models["llm"]["model"], settings)
        self._call(self.engine.start())
        self.cache: dict[str, tuple[float, float]] = {}
        self.log: list[float] = []

    def _call(self, coroutine):
        import asyncio

        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def __call__(self, text: str) -> tuple[float, float]:
        said = as_said(text)
        if said not in self.cache:
            t0 = time.perf_counter()
            logp = self._call(self.engine.turn_end_logprob(said, f"judge-{len(self.log)}")) if said else 0.0
            ms = (time.perf_counter() - t0) * 1000
            if logp is None:
                raise SystemExit(f"the profile's LLM backend ({self.engine.name}) cannot judge words")
            self.log.append(ms)
            self.cache[said] = (logp, ms)
        return self.cache[said]

    def close(self) -> None:
        self._call(self.engine.close())


class ModelJudge:
    """Our end-of-turn model (app/turn_model, ``--reader model``) judging words: log P(done); each text once."""

    def __init__(self, profile: object, models: dict) -> None:
        from sub250.rag.embedder import Embedder
        from sub250.turn_model.model import TurnModel

        m = models["embedder"]
        embedder = Embedder(m["model"], m["tokenizer"], dict(profile.stage("embedder"), intra_op_threads=1))
        embedder.load()
        self.engine = TurnModel(embedder, m["tokenizer"], sha256=profile.stage("vad").get("model_sha256"))
        self.engine.load()
        self.cache: dict[str, tuple[float, float]] = {}
        self.log: list[float] = []

    def __call__(self, text: str) -> tuple[float, float]:
        said = as_said(text)
        if said not in self.cache:
            t0 = time.perf_counter()
            p = self.engine.probability(said)
            ms = (time.perf_counter() - t0) * 1000
            self.log.append(ms)
            self.cache[said] = (float(np.log(max(p, 1e-12))), ms)
        return self.cache[said]

    def close(self) -> None:
        pass


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
            elif r["kind"] == "words":
                ax.scatter(x, y, marker="v", s=60, color="tab:cyan" if r["cap_ms"] < 1500 else "tab:brown")
            else:
                color = {150: "tab:blue", 200: "tab:orange", 250: "tab:green"}.get(r["pause_ms"], "tab:red")
                kind = r["kind"]
                marker = ("X" if "+then" in kind else "*" if "+cue" in kind else "D" if kind.endswith("+trim")
                          else "P" if kind.endswith("+once") else "o" if r["cap_ms"] < 2000 else "^")
                ax.scatter(x, y, marker=marker, s=70 if marker == "*" else 40, color=color)
            ax.annotate(r["label"], (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
        n, k = next((r["n_end"], r["n_paused"]) for r in rows if r["group"] == group)
        ax.set_title(f"{group} speech ({n} utterances ending normally; {k} streams with a pause inserted)", fontsize=9)
        ax.set_xlim(left=-2)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("false cut-offs on inserted mid-utterance pauses (%)")
        ax.set_ylabel("mean endpoint delay on true ends (ms)")
        ax.grid(alpha=0.3)
    fig.suptitle("Endpointing: silence rules (black squares; +cue purple) vs smart-turn v3.2 (first score at "
                 "150/200/250 ms blue/orange/green;\ncap 1.5 s circles, 2 s triangles, +once plus signs, +trim "
                 "diamonds, +cue stars, +then crosses; the LLM's reading of the words: down triangles); target: grey corner", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def timed_words(asr: object, audio: np.ndarray) -> list[Word]:
    """Whisper's words of the whole utterance with their times (five beams, word timestamps)."""
    segments, _ = asr.model.transcribe(audio, language="en", beam_size=5, word_timestamps=True,
                                       condition_on_previous_text=False, vad_filter=False)
    return [Word(w.word.strip(), w.start, w.end) for seg in segments for w in (seg.words or [])]


def main(args: argparse.Namespace) -> int:
    from sub250.asr.whisper import WhisperASR
    from sub250.audio.smart_turn import SmartTurn

    settings = Settings.from_env()
    profile = load_profile(settings.profile)
    need_asr = not args.no_cue or args.placement == "words" or args.words
    models = prepare(profile, settings.models_dir, stages=("vad", "turn") + (("asr",) if need_asr else ())
                     + (("llm",) if args.words and args.reader == "llm" else ())
                     + (("embedder",) if args.words and args.reader == "model" else ()))
    threshold = float(profile.stage("vad").get("threshold", 0.5))
    vad = SileroVAD.load_session(models["vad"]["model"], threads=1)
    engine = SmartTurn(models["turn"]["model"], dict(profile.stage("turn"), intra_op_threads=args.threads))
    engine.load()
    asr = None
    if need_asr:
        asr = WhisperASR(models["asr"]["model"], dict(profile.stage("asr"), cpu_threads=1, full_window_cpu_threads=1))
        asr.load()

    judge = None if not args.words else LLMJudge(profile, models, settings) if args.reader == "llm" else \
        ModelJudge(profile, models)
    strategies: list = [Silence(500), Silence(300)]
    if args.words:
        strategies += [WordsRule(c, t, int(cap * 1000), unfinished_ms=u) for cap in args.word_caps
                       for c in args.word_commits for t in args.word_thresholds for u in [None, *args.word_unfinished]]
    strategies += [SmartTurnRule(s, t, int(c * 1000)) for s in args.pauses for c in args.caps for t in args.thresholds]
    strategies += [SmartTurnRule(s, t, 1500, once=True) for s in args.pauses for t in args.thresholds]
    strategies += [SmartTurnRule(s, t, 1500, trim=True) for s in args.pauses for t in args.thresholds]
    # semantic_vad as the session runs it (app/session/turn_detection.py): asked once a pause, then the cap
    shipped = {e: SmartTurnRule(t.ask_after_ms, t.threshold, t.cap_ms, once=True) for e, t in EAGERNESS.items()}
    strategies += [s for s in dict.fromkeys(shipped.values()) if s not in strategies]
    strategies += [SmartTurnRule(s, t, 1500, once=True, fallback_ms=f)
                   for s in args.pauses for t in args.thresholds for f in args.fallbacks]
    if not args.no_cue:
        strategies += [SilenceCue(300, 1500)]
        strategies += [SmartTurnRule(s, t, 1500, cue=True) for s in args.pauses for t in args.thresholds]
        # the cue as the session takes it: the held reply's transcript, asked for at [vad] speculate_after_ms
        ahead = int(profile.stage("vad").get("speculate_after_ms", 64)) or 64
        strategies += [SmartTurnRule(s, t, 1500, once=True, cue=True, fallback_ms=f, cue_after_ms=ahead)
                       for s in args.pauses for t in args.thresholds for f in args.fallbacks]
        # server_vad with [vad] hold_open_ms, and semantic_vad's shipped timings with it, as the session runs them
        strategies += [SilenceCue(500, h, cue_after_ms=ahead) for h in args.holds]
        strategies += [SilenceCue(300, h, cue_after_ms=ahead) for h in args.holds]
        strategies += [replace(rule, cue=True, cue_after_ms=ahead) for rule in dict.fromkeys(shipped.values())]
    utts = real_recordings() + synthesize_corpus(settings.home / "corpus")
    rng = np.random.default_rng(args.seed)
    tail = np.zeros(int(args.tail_s * ASR_RATE), dtype=np.float32)
    compute_log: list[float] = []
    asr_log: list[float] = []
    streams = []
    t_start = time.perf_counter()
    for u in utts:
        audio = load_audio(str(u.path))
        if args.placement == "words":  # every place between two words: (sample, open|other, the words before)
            places = [(b.sample, b.kind, b.prefix) for b in word_boundaries(audio, timed_words(asr, audio))]
        else:
            at, how = pause_point(audio, vad_probs(vad, audio, threshold), threshold=threshold)
            places = [(at, how, None)]
        variants = [("end", np.concatenate([audio, tail]), None)]
        for at, kind, prefix in places:
            pause = int(rng.uniform(0.3, 0.8) * ASR_RATE)
            variants.append(("paused", np.concatenate([with_pause(audio, at, pause), tail]), (at, pause, kind, prefix)))
        for variant, stream, place in variants:
            probs = vad_probs(vad, stream, threshold)
            end = window_end_ms(speech_end_window(probs, threshold))
            truth = Truth(end, None if place is None else
                          (place[0] / ASR_RATE * 1000, speech_heard_again_ms(probs, place[0] + place[1],
                                                                               threshold=threshold)))
            scores = Scores(engine, stream, compute_log)
            texts = Transcripts(asr, stream, asr_log) if not args.no_cue or judge else None
            commits = {s.name: simulate(s, probs, scores, texts, threshold=threshold, judge=judge)
                       for s in strategies}
            outcomes = {name: classify(c, truth) for name, c in commits.items()}
            streams.append({
                "id": u.id, "group": u.kind, "variant": variant, "seconds": round(stream.size / ASR_RATE, 3),
                "speech_end_ms": end, "pause": truth.pause,
                "pause_ms": round(place[1] / ASR_RATE * 1000) if place else None,
                "pause_found_by": place[2] if place and args.placement == "gap" else None,
                "place": place[2] if place and args.placement == "words" else None,
                "prefix": place[3] if place else None,
                "scores": sorted([w, round(p, 4)] for (_, w), (p, _) in scores.cache.items()),
                "transcripts": sorted([w, t] for (_, w), (t, _) in texts.cache.items()) if texts else [],
                "outcomes": {n: {"kind": o.kind, "delay_ms": o.delay_ms,
                                 "by": commits[n].by if commits[n] else None} for n, o in outcomes.items()},
            })
        kinds = [k for _, k, _ in places]
        print(f"  {u.kind:<9} {u.id:<12} {len(places)} pause(s): "
              + (f"{kinds.count('open')} open, {kinds.count('other')} other" if args.placement == "words"
                 else f"{places[0][0] / ASR_RATE:.2f} s ({places[0][1]})")
              + f"; {len(compute_log)} smart-turn calls so far", flush=True)
    run_s = time.perf_counter() - t_start

    rows = []
    for s in strategies:
        for group in ("real", "synthetic"):
            mine = [x for x in streams if x["group"] == group]
            outs = {v: [Outcome(x["outcomes"][s.name]["kind"], x["outcomes"][s.name]["delay_ms"])
                        for x in mine if x["variant"] == v] for v in ("end", "paused")}
            row = {"strategy": s.name, "group": group, **summarize(outs["end"], outs["paused"])}
            for place in ("open", "other"):  # --placement words: the cut-offs at each kind of place alone
                at = [Outcome(x["outcomes"][s.name]["kind"]) for x in mine if x["place"] == place]
                row[f"n_{place}"] = len(at)
                row[f"cut_{place}_rate"] = sum(o.kind == "cut_pause" for o in at) / len(at) if at else None
            if isinstance(s, Silence):
                row.update(kind="silence", label=s.name)
            elif isinstance(s, WordsRule):
                then = "" if s.unfinished_ms is None else f"/{s.unfinished_ms}"
                row.update(kind="words", label=f"w{s.threshold:g}/{s.commit_ms}{then}/{s.cap_ms / 1000:g}",
                           cap_ms=s.cap_ms, threshold=s.threshold, commit_ms=s.commit_ms, unfinished_ms=s.unfinished_ms)
            elif isinstance(s, SilenceCue):
                at = "" if s.cue_after_ms is None else f"@{s.cue_after_ms}"
                row.update(kind="silence+cue", label=f"{s.silence_ms}+cue{at}/{s.cap_ms / 1000:g}", cap_ms=s.cap_ms)
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
    if judge is not None:
        print(f"{'LLM' if args.reader == 'llm' else 'end-of-turn model'} judging the words: {len(judge.log)} texts, p50 {np.percentile(judge.log, 50):.1f}, "
              f"p95 {np.percentile(judge.log, 95):.1f} ms")
    if asr_log:
        print(f"whisper transcript for the cue: {len(asr_log)} calls, p50 {np.percentile(asr_log, 50):.1f}, "
              f"p95 {np.percentile(asr_log, 95):.1f} ms")
    for group in ("real", "synthetic"):
        mine = [x for x in streams if x["group"] == group]
        places = [x["place"] or x["pause_found_by"] for x in mine if x["variant"] == "paused"]
        print(f"{group}: {sum(x['variant'] == 'end' for x in mine)} utterances, {len(places)} paused streams"
              + (f" ({places.count('open')} open, {places.count('other')} other)" if args.placement == "words" else ""))
    print()
    head = (f"{'strategy':<48}{'speech':<11}{'mean ms':>8}{'p95 ms':>8}{'cut@pause':>10}{'@open':>7}{'@other':>7}"
            f"{'early':>7}{'missed':>7}  target")
    print(head)
    print("-" * len(head))
    fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    for r in rows:
        print(f"{r['strategy']:<48}{r['group']:<11}{fmt(r['mean_delay_ms'], '8.0f'):>8}{fmt(r['p95_delay_ms'], '8.0f'):>8}"
              f"{fmt(r['cut_pause_rate'], '.1%'):>10}{fmt(r['cut_open_rate'], '.0%'):>7}"
              f"{fmt(r['cut_other_rate'], '.0%'):>7}{fmt(r['early_rate'], '.1%'):>7}{r['missed']:>7}  "
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
        "placement": args.placement,
        "target": {"cut_pause_rate_max": TARGET_CUT, "mean_delay_ms_max": TARGET_DELAY_MS},
        "smart_turn": {"model": str(models["turn"]["model"]), "threads": args.threads, "cost_50_calls": cost,
                       "run_calls": len(compute_log), "run_p50_ms": float(np.percentile(compute_log, 50)),
                       "run_p95_ms": float(np.percentile(compute_log, 95))},
        "words_llm": ({"reader": args.reader, "texts": len(judge.log), "p50_ms": float(np.percentile(judge.log, 50)),
                       "p95_ms": float(np.percentile(judge.log, 95)),
                       "scores": {t: round(v[0], 3) for t, v in judge.cache.items()}} if judge else None),
        "cue_asr": ({"calls": len(asr_log), "p50_ms": float(np.percentile(asr_log, 50)),
                     "p95_ms": float(np.percentile(asr_log, 95))} if asr_log else None),
        "rows": rows, "streams": streams,
        "semantic_vad": {e: rule.name for e, rule in shipped.items()},
    }
    out_json.write_text(json.dumps(result, indent=1) + "\n")
    plot(rows, out_png)
    if judge is not None:
        judge.close()
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
    p.add_argument("--holds", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 1500, 2000],
                   help="ms of silence that end a pause whose words end open ([vad] hold_open_ms)")
    p.add_argument("--fallbacks", type=lambda s: [int(x) for x in s.split(",")], default=[500, 700],
                   help="ms of silence that commit a pause smart-turn called incomplete (the tiered rules)")
    p.add_argument("--placement", choices=("words", "gap"), default="words",
                   help="where the mid-utterance pause goes: every place between two words, or one VAD gap (§14)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tail-s", type=float, default=2.5, help="silence after each utterance (s)")
    p.add_argument("--threads", type=int, default=1, help="smart-turn onnxruntime threads")
    p.add_argument("--words", action="store_true", help="also the LLM's reading of the words (starts the LLM)")
    p.add_argument("--reader", choices=("llm", "model"), default="llm",
                   help="--words: who reads them: the served LLM, or our end-of-turn model (app/turn_model)")
    p.add_argument("--word-thresholds", type=floats, default=[-14.0, -13.0, -12.0],
                   help="log P(turn ends) at which the words count as a finished turn")
    p.add_argument("--word-commits", type=lambda s: [int(x) for x in s.split(",")], default=[200, 300],
                   help="ms of silence that commit a finished turn")
    p.add_argument("--word-unfinished", type=lambda s: [int(x) for x in s.split(",") if x], default=[],
                   help="ms of silence that end a pause the LLM read as unfinished, words not open (besides the cap)")
    p.add_argument("--word-caps", type=floats, default=[1.0, 1.5], help="s of silence that commit any other pause")
    p.add_argument("--no-cue", action="store_true", help="leave out the transcript-cue variants (no Whisper)")
    raise SystemExit(main(p.parse_args()))
