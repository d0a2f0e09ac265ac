"""The endpointing benchmark's accounting (sans-I/O, no models): strategies that decide when a turn is over,
run window by window over VAD probabilities through the real ``Endpointer``, and the scoring of their first
commit against what the audio really was (``scripts/bench_endpointing.py`` runs it on real models).

* ``Silence(ms)``: today's rule, commit after ``ms`` of silence (the endpointer's ``SpeechStopped``).
* ``SmartTurnRule(pause_ms, threshold, cap_ms)``: at ``pause_ms`` of silence the end-of-turn model scores the
  audio so far; ``p >= threshold`` commits when the score is ready (its compute time counts), otherwise it is
  re-scored every ``rescore_ms`` of further silence (one call at a time: never sooner than the last result),
  and ``cap_ms`` of silence commits anyway. Speech resuming before a result is ready makes it stale.
  ``trim=True`` scores the audio only up to the last speech window (without the silence heard since), once per
  pause, since that audio does not change while the silence lasts; ``once=True`` scores once a pause with the
  silence so far (as Pipecat does: a turn it calls incomplete ends only at the cap). ``fallback_ms``: once the
  model has called the pause incomplete, ``fallback_ms`` of silence commits it (not only the cap) - unless the
  transcript cue holds the pause, which then ends only at the cap.

Transcript cue (``cue=True``, ``SilenceCue``): when the pause starts, Whisper transcribes the audio so far (on
its own engine, in parallel with smart-turn; its compute time counts); a transcript that ends on a word that
cannot end a question (``and``, ``the``, ``of``, a number word, ...: ``app/session/turn_cue.py``, the session's own
test) vetoes every commit of that pause but the cap.

Words judged by the LLM (``WordsRule``): at ``cue_after_ms`` of silence (the session's held reply) Whisper's
transcript so far, then the served LLM's log-probability that a user message ends right after those words
(``LLMEngine.turn_end_logprob``); both compute times count. At or above ``threshold`` (and words that do not end
open) the pause commits at ``commit_ms`` of silence, or when the verdict is known if later; otherwise it ends only
at ``cap_ms`` (or, with ``unfinished_ms``, words that do not end open at that silence).

Where a pause goes (``word_boundaries``): between two words of the utterance as Whisper timed them, at the quietest
10 ms near their meeting point. A boundary is ``"open"`` when the words before it end on one a turn does not end on
(``ends_open``: "the | filter", "and | then", a number still being read): where a speaker hesitates; every other
boundary is ``"other"`` - among them prefixes that are whole questions by themselves ("How long does it take? | to
get my refund"), which no detector that only hears the past can tell from a finished turn.

A stream's truth is when its speech really ended and, for a stream with a pause inserted mid-utterance, that
pause. The first commit is the decision: before the end it is a false cut-off (``cut_pause`` inside the
inserted pause, ``early`` at some other gap), after it a true end with a delay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sub250.audio.endpointing import (WINDOW_MS, Endpointer, SpeechPaused, SpeechResumed, SpeechStarted, SpeechStopped,
                                  ms_to_windows)
from sub250.session.turn_cue import ends_open

#: score(start_window, window) -> (probability the turn is complete, compute ms): the audio from the start of
#: speech (the caller adds its pre-roll) to the end of ``window``.
Scorer = Callable[[int, int], tuple[float, float]]
#: transcribe(start_window, last_speech_window) -> (text, compute ms): the audio so far, as Whisper hears it.
Transcriber = Callable[[int, int], tuple[str, float]]
#: judge(text) -> (log-probability the caller's turn ends after these words, compute ms).
Judge = Callable[[str], tuple[float, float]]

@dataclass(frozen=True)
class Silence:
    silence_ms: int

    @property
    def name(self) -> str:
        return f"silence-{self.silence_ms}"


@dataclass(frozen=True)
class SilenceCue:
    """Commit after ``silence_ms`` of silence unless the transcript so far ends open; then at ``cap_ms``.

    ``cue_after_ms`` None: the transcript is asked for at ``silence_ms`` (§14). A number: it is asked for at
    that silence (the session's held reply, at ``[vad] speculate_after_ms``) - ``server_vad`` with ``[vad]
    hold_open_ms = cap_ms``, as the session runs it. Either way a commit waits for a transcript not known yet."""

    silence_ms: int
    cap_ms: int
    cue_after_ms: int | None = None

    @property
    def name(self) -> str:
        at = "" if self.cue_after_ms is None else f"@{self.cue_after_ms}"
        return f"silence-{self.silence_ms}+cue{at} cap {self.cap_ms / 1000:g}s"


@dataclass(frozen=True)
class SmartTurnRule:
    pause_ms: int
    threshold: float
    cap_ms: int
    rescore_ms: float = 3 * WINDOW_MS
    cue: bool = False
    trim: bool = False  # score the audio up to the last speech window only (once a pause: it does not change)
    once: bool = False  # score once a pause (Pipecat's way: then only the cap ends the turn)
    fallback_ms: int | None = None  # silence that commits a pause the model called incomplete (None: the cap)
    cue_after_ms: int | None = None  # silence at which the cue's transcript is asked for (None: at pause_ms)

    @property
    def extra(self) -> str:
        cue = "" if not self.cue else "+cue" if self.cue_after_ms is None else f"+cue@{self.cue_after_ms}"
        return ("+trim" if self.trim else "") + ("+once" if self.once else "") + cue \
            + (f"+then{self.fallback_ms}" if self.fallback_ms is not None else "")

    @property
    def name(self) -> str:
        return f"smart-turn@{self.pause_ms}ms p>={self.threshold:g}{self.extra} cap {self.cap_ms / 1000:g}s"


@dataclass(frozen=True)
class WordsRule:
    """Commit at ``commit_ms`` of silence when the LLM reads the words so far as a finished turn (log P(end) >=
    ``threshold``, words not open), else at ``cap_ms``; the words are asked for at ``cue_after_ms``."""

    commit_ms: int
    threshold: float
    cap_ms: int
    cue_after_ms: int = 64
    #: Silence that ends a pause the LLM read as unfinished when its words do not end open (None: the cap).
    unfinished_ms: int | None = None

    @property
    def name(self) -> str:
        then = "" if self.unfinished_ms is None else f" else {self.unfinished_ms}"
        return (f"words@{self.cue_after_ms} lp>={self.threshold:g} at {self.commit_ms}{then} "
                f"cap {self.cap_ms / 1000:g}s")


Strategy = Silence | SilenceCue | SmartTurnRule | WordsRule


@dataclass(frozen=True)
class Commit:
    time_ms: float  # when the decision is made (the end of a window, plus the model's compute if it decided)
    window: int  # the window being processed (or whose score decided)
    by: str  # "silence" | "model" | "fallback" | "cap"
    probability: float | None = None


@dataclass(frozen=True)
class Truth:
    speech_end_ms: float  # the end of the last speech window of the utterance
    pause: tuple[float, float] | None = None  # inserted pause: (its start, when speech is heard again), ms


@dataclass(frozen=True)
class Outcome:
    kind: str  # "end" | "cut_pause" | "early" | "missed"
    delay_ms: float | None = None  # for "end": commit - speech end


def window_end_ms(index: int) -> float:
    return (index + 1) * WINDOW_MS


def simulate(strategy: Strategy, probs: Sequence[float], score: Scorer | None = None,
             transcribe: Transcriber | None = None, *, threshold: float = 0.5, judge: Judge | None = None
             ) -> Commit | None:
    """The first commit ``strategy`` makes on the VAD probabilities ``probs`` (one per 32 ms window)."""
    if isinstance(strategy, WordsRule):
        if transcribe is None or judge is None:
            raise ValueError(f"{strategy.name} needs a transcriber and a judge")
        return _simulate_words(strategy, probs, transcribe, judge, threshold)
    if isinstance(strategy, Silence):
        ep = Endpointer(threshold, strategy.silence_ms)
        for i, p in enumerate(probs):
            if isinstance(ep.push(p, i), SpeechStopped):
                return Commit(window_end_ms(i), i, "silence")
        return None
    uses_model = isinstance(strategy, SmartTurnRule)
    uses_cue = isinstance(strategy, SilenceCue) or strategy.cue
    if uses_model and score is None:
        raise ValueError(f"{strategy.name} needs a scorer")
    if uses_cue and transcribe is None:
        raise ValueError(f"{strategy.name} needs a transcriber")
    pause_ms = strategy.silence_ms if isinstance(strategy, SilenceCue) else strategy.pause_ms
    ep = Endpointer(threshold, strategy.cap_ms, pause_ms=pause_ms)
    # the silence (windows) at which the cue's transcript is asked for: at the pause, or sooner (the held reply's)
    cue_windows = None if not uses_cue or strategy.cue_after_ms is None else ms_to_windows(strategy.cue_after_ms)
    start = -1
    paused = False
    next_score_ms = 0.0
    scored_this_pause = False
    declined = False  # the model called this pause incomplete (a ``fallback_ms`` rule then waits that long)
    pending: tuple[float, float, int] | None = None  # (ready at ms, probability, window scored)
    cue: tuple[float, bool] | None = None  # this pause's transcript: (ready at ms, ends open)

    def decide(ready_ms: float, window: int, by: str, prob: float | None) -> Commit | None:
        """A commit the rule wants at ``ready_ms``, unless the pause's transcript vetoes it."""
        if cue is None:
            return Commit(ready_ms, window, by, prob)
        cue_ready, vetoed = cue
        return None if vetoed else Commit(max(ready_ms, cue_ready), window, by, prob)

    for i, p in enumerate(probs):
        now = window_end_ms(i)
        if pending is not None and pending[0] <= now:  # the result arrived before this window
            ready, prob, scored = pending
            pending = None
            if prob >= strategy.threshold and (commit := decide(ready, scored, "model", prob)) is not None:
                return commit
            declined = declined or prob < strategy.threshold
        decision = ep.push(p, i)
        if isinstance(decision, SpeechStarted):
            start = decision.window
        elif isinstance(decision, SpeechStopped):
            return Commit(now, i, "cap")
        elif isinstance(decision, SpeechResumed):
            paused, pending, cue, declined = False, None, None, False
        elif isinstance(decision, SpeechPaused):
            paused, next_score_ms, scored_this_pause, declined = True, now, False, False
            if uses_cue and cue_windows is None:
                text, asr_ms = transcribe(start, decision.window)
                cue = (now + asr_ms, ends_open(text))
        if ep.speaking and ep.silence_run == 0:
            cue = None  # speech again, even after a gap too short to be a pause: a later one asks anew
        if cue_windows is not None and cue is None and ep.silence_run == cue_windows:
            text, asr_ms = transcribe(start, ep.last_speech_window)
            cue = (now + asr_ms, ends_open(text))
        if isinstance(decision, SpeechPaused):
            if not uses_model and (commit := decide(now, i, "silence", None)) is not None:
                return commit
        if (uses_model and declined and strategy.fallback_ms is not None
                and ep.silence_run * WINDOW_MS >= strategy.fallback_ms
                and (commit := decide(now, i, "fallback", None)) is not None):
            return commit
        if (uses_model and paused and pending is None and now >= next_score_ms and not (cue and cue[1])
                and not ((strategy.trim or strategy.once) and scored_this_pause)):
            prob, compute_ms = score(start, ep.last_speech_window if strategy.trim else i)
            pending = (now + compute_ms, prob, i)
            next_score_ms = max(now + strategy.rescore_ms, now + compute_ms)
            scored_this_pause = True
    if pending is not None and pending[1] >= strategy.threshold:
        return decide(pending[0], pending[2], "model", pending[1])
    return None


def _simulate_words(rule: WordsRule, probs: Sequence[float], transcribe: Transcriber, judge: Judge,
                    threshold: float) -> Commit | None:
    ep = Endpointer(threshold, rule.cap_ms)
    ask_at = ms_to_windows(rule.cue_after_ms)  # windows of silence
    start = -1
    # this pause's: (known at ms, finished, log-probability, the words end open)
    verdict: tuple[float, bool, float, bool] | None = None
    for i, p in enumerate(probs):
        now = window_end_ms(i)
        decision = ep.push(p, i)
        if isinstance(decision, SpeechStarted):
            start = decision.window
        elif isinstance(decision, SpeechStopped):
            return Commit(now, i, "cap")
        if ep.speaking and ep.silence_run == 0:
            verdict = None  # speech again: the next pause asks anew
        if ep.speaking and verdict is None and ep.silence_run == ask_at:
            text, asr_ms = transcribe(start, ep.last_speech_window)
            logp, lm_ms = judge(text)
            is_open = ends_open(text)
            verdict = (now + asr_ms + lm_ms, logp >= rule.threshold and not is_open, logp, is_open)
        if verdict is None or verdict[0] >= now + WINDOW_MS:  # not known by the next window
            continue
        if verdict[1] and ep.silence_run * WINDOW_MS >= rule.commit_ms:
            return Commit(max(now, verdict[0]), i, "words", verdict[2])
        if (not verdict[1] and not verdict[3] and rule.unfinished_ms is not None
                and ep.silence_run * WINDOW_MS >= rule.unfinished_ms):
            return Commit(max(now, verdict[0]), i, "fallback", verdict[2])
    return None


def classify(commit: Commit | None, truth: Truth) -> Outcome:
    if commit is None:
        return Outcome("missed")
    if commit.time_ms < truth.speech_end_ms:
        if truth.pause is not None and truth.pause[0] <= commit.time_ms < truth.pause[1]:
            return Outcome("cut_pause")
        return Outcome("early")
    return Outcome("end", commit.time_ms - truth.speech_end_ms)


def summarize(ends: Sequence[Outcome], paused: Sequence[Outcome]) -> dict[str, float | int | None]:
    """``ends``: outcomes on streams that end normally; ``paused``: on streams with an inserted pause.

    Delays are over the true ends committed after the speech ended; ``cut_pause_rate`` is the share of paused
    streams committed inside the inserted pause, ``early_rate`` the share of all streams committed before
    their end anywhere else (natural gaps)."""
    delays = [o.delay_ms for o in ends if o.kind == "end" and o.delay_ms is not None]
    every = list(ends) + list(paused)
    return {
        "n_end": len(ends),
        "n_paused": len(paused),
        "mean_delay_ms": float(np.mean(delays)) if delays else None,
        "p95_delay_ms": float(np.percentile(delays, 95)) if delays else None,
        "cut_pause_rate": sum(o.kind == "cut_pause" for o in paused) / len(paused) if paused else None,
        "early_rate": sum(o.kind == "early" for o in every) / len(every) if every else None,
        "missed": sum(o.kind == "missed" for o in every),
    }


@dataclass(frozen=True)
class Word:
    text: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Boundary:
    """A place between two words of an utterance where a pause can be inserted."""

    sample: int  # where the pause goes
    after: int  # the index of the word before it
    prefix: str  # the words before it

    @property
    def kind(self) -> str:
        """``"open"``: the words before it end on one no turn ends on (a hesitation); ``"other"``: any other."""
        return "open" if ends_open(self.prefix) else "other"


def word_boundaries(audio: np.ndarray, words: Sequence[Word], *, rate: int = 16_000,
                    slack_s: float = 0.04) -> list[Boundary]:
    """Every place between two consecutive ``words`` (as Whisper timed them on ``audio``): the quietest 10 ms
    (5 ms hop) from ``slack_s`` before the first word's end to ``slack_s`` after the next word's start, kept
    inside the two words' second and first halves (Whisper's word times are ~20 ms steps and may overlap)."""
    frame, hop = int(0.01 * rate), int(0.005 * rate)
    out = []
    for k in range(len(words) - 1):
        a, b = words[k], words[k + 1]
        lo = max((a.start_s + a.end_s) / 2, a.end_s - slack_s)
        hi = min((b.start_s + b.end_s) / 2, b.start_s + slack_s)
        lo_i = max(0, int(lo * rate))
        hi_i = min(audio.size - frame, max(lo_i, int(hi * rate) - frame))
        starts = np.arange(lo_i, hi_i + 1, hop)
        if starts.size == 0:
            continue
        energy = [float(np.mean(audio[s : s + frame] ** 2)) for s in starts]
        at = int(starts[int(np.argmin(energy))]) + frame // 2
        out.append(Boundary(at, k, " ".join(w.text.strip() for w in words[: k + 1])))
    return out


def speech_end_window(probs: Sequence[float], threshold: float = 0.5) -> int:
    """The last window the endpointer counts as speech (at or above its hysteresis threshold); -1 if none."""
    neg = Endpointer(threshold).neg_threshold
    above = np.flatnonzero(np.asarray(probs) >= neg)
    return int(above[-1]) if above.size else -1


def speech_heard_again_ms(probs: Sequence[float], after_sample: int, *, window: int = 512,
                          threshold: float = 0.5) -> float:
    """When speech is heard again after ``after_sample`` (the end of an inserted pause): the end of the first
    window from there at or above the hysteresis threshold (the end of the stream if none)."""
    neg = Endpointer(threshold).neg_threshold
    first = after_sample // window
    later = np.flatnonzero(np.asarray(probs[first:]) >= neg)
    return window_end_ms(first + int(later[0]) if later.size else len(probs) - 1)


def pause_point(audio: np.ndarray, probs: Sequence[float], *, rate: int = 16_000, window: int = 512,
                threshold: float = 0.5, margin_s: float = 0.3) -> tuple[int, str]:
    """Where to insert a pause mid-utterance: (sample index, how it was found).

    The speech span is the first to the last window at or above ``threshold``. ``"vad-gap"``: the quietest
    30 ms (10 ms hop) inside windows below ``threshold`` that lie at least ``max(margin_s, 20 %)`` of the span
    from its start and end, i.e. a gap between words as the VAD hears it; ``"middle"``: no such gap, the
    quietest 30 ms of the middle half of the span."""
    p = np.asarray(probs)
    speech = np.flatnonzero(p >= threshold)
    if speech.size == 0:
        raise ValueError("no speech in this audio to insert a pause into")
    lo, hi = int(speech[0]) * window, (int(speech[-1]) + 1) * window
    span = hi - lo
    margin = max(int(margin_s * rate), span // 5)
    frame, hop = int(0.03 * rate), int(0.01 * rate)
    starts = np.arange(lo, max(lo, hi - frame) + 1, hop)
    energy = np.array([float(np.mean(audio[s : s + frame] ** 2)) for s in starts])
    centers = starts + frame // 2
    gap = np.array([p[min(c // window, p.size - 1)] < threshold for c in centers])
    inner = (centers >= lo + margin) & (centers <= hi - margin)
    for mask, how in ((inner & gap, "vad-gap"),
                      ((centers >= lo + span // 4) & (centers <= hi - span // 4), "middle")):
        if mask.any():
            best = int(np.flatnonzero(mask)[np.argmin(energy[mask])])
            return int(centers[best]), how
    return int(lo + span // 2), "middle"
